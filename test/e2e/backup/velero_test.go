package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// veleroNS is where Velero's server and its objects live, as `velero
// install` sets it up.
const veleroNS = "velero"

var (
	backupGVR  = schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: "backups"}
	restoreGVR = schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: "restores"}
	bslGVR     = schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: "backupstoragelocations"}
	dbrGVR     = schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: "deletebackuprequests"}
)

// velero is Velero's server and its backup location (an S3 server of
// our own on loopback with an empty bucket) for one test.
type velero struct {
	env        *framework.Env
	bin        string
	dir        string
	creds      string
	pluginDir  string
	s3URL      string
	server     *framework.Process
	serverArgs []string
}

var crdsOnce struct {
	sync.Once
	err error
}

// startVelero installs Velero's CRDs (`velero install --crds-only`, once),
// its namespace and a BackupStorageLocation "default" on a new S3 server,
// and starts `velero server` with CSI snapshots on (EnableCSI) and the AWS
// plugin. t.Cleanup stops both and removes every Velero object, so the
// next test starts from an empty location.
func startVelero(t *testing.T, env *framework.Env) *velero {
	t.Helper()
	v := &velero{env: env, dir: env.TempDir(t, "velero")}
	var err error
	if v.bin, err = framework.Tool("velero"); err != nil {
		t.Fatalf("%v (make test-backup)", err)
	}
	plugin, err := framework.Tool("velero-plugin-for-aws")
	if err != nil {
		t.Fatal(err)
	}
	fakes3, err := framework.Tool("fakes3")
	if err != nil {
		t.Fatal(err)
	}
	crdsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, crdsOnce.err = v.cli(ctx, "install", "--crds-only")
	})
	if crdsOnce.err != nil {
		t.Fatalf("velero install --crds-only: %v", crdsOnce.err)
	}
	if err := env.EnsureNamespace(context.Background(), veleroNS); err != nil {
		t.Fatal(err)
	}

	// Velero's restore reads its own Deployment (for the image of its
	// restore helper) as `velero install` creates it; here the server runs
	// as a process, so the Deployment is there with no replica.
	zero := int32(0)
	labels := map[string]string{"component": "velero", "deploy": "velero"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "velero", Namespace: veleroNS, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "velero", Image: "velero/velero:v1.18.3", Command: []string{"/velero"}, Args: []string{"server", "--features=EnableCSI"},
				}}},
			},
		},
	}
	if _, err := env.Kube.AppsV1().Deployments(veleroNS).Create(context.Background(), deploy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// The object store.
	addrFile := filepath.Join(v.dir, "s3.addr")
	s3, err := framework.StartProcess(v.dir, "fakes3", fakes3, []string{"-bucket", "velero", "-addr-file", addrFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Stop(5 * time.Second) })
	framework.Eventually(t, 30*time.Second, "the S3 server serving", func() (bool, error) {
		b, err := os.ReadFile(addrFile)
		if err == nil && len(b) > 0 {
			v.s3URL = "http://" + string(b)
			return true, nil
		}
		return false, fmt.Errorf("%v; log: %s", err, s3.Tail(500))
	})
	v.creds = filepath.Join(v.dir, "credentials")
	if err := os.WriteFile(v.creds, []byte("[default]\naws_access_key_id=snapkeeper\naws_secret_access_key=snapkeeper\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bsl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
		"metadata": map[string]any{"name": "default", "namespace": veleroNS},
		"spec": map[string]any{
			"provider": "aws", "default": true,
			"objectStorage": map[string]any{"bucket": "velero"},
			"config":        map[string]any{"region": "local", "s3ForcePathStyle": "true", "s3Url": v.s3URL},
		},
	}}
	if _, err := env.Dynamic.Resource(bslGVR).Namespace(veleroNS).Create(context.Background(), bsl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Velero finds plugins by running every executable in its plugin
	// directory.
	v.pluginDir = filepath.Join(v.dir, "plugins")
	if err := os.MkdirAll(v.pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(plugin, filepath.Join(v.pluginDir, "velero-plugin-for-aws")); err != nil {
		t.Fatal(err)
	}
	metrics, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	profiler, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	v.serverArgs = []string{"server", "--kubeconfig", env.Kubeconfig, "--namespace", veleroNS, "--features=EnableCSI",
		"--plugin-dir", v.pluginDir, "--metrics-address", metrics, "--profiler-address", profiler,
		"--log-level", "info", "--store-validation-frequency", "5s", "--backup-sync-period", "0s"}
	v.start(t)
	t.Cleanup(func() { v.cleanup(t) })
	framework.Eventually(t, time.Minute, "the backup location Available", func() (bool, error) {
		u, err := env.Dynamic.Resource(bslGVR).Namespace(veleroNS).Get(context.Background(), "default", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "Available", fmt.Errorf("phase %q; server log: %s", phase, v.server.Tail(2000))
	})
	return v
}

// start runs `velero server` (again, after a kill).
func (v *velero) start(t *testing.T) {
	t.Helper()
	p, err := framework.StartProcess(v.dir, "velero-server", v.bin, v.serverArgs, "AWS_SHARED_CREDENTIALS_FILE="+v.creds)
	if err != nil {
		t.Fatal(err)
	}
	v.server = p
}

// cleanup stops the server and deletes every Velero object it left, so
// that the next test's server does not act on them.
func (v *velero) cleanup(t *testing.T) {
	if t.Failed() {
		t.Logf("velero server log (tail):\n%s", v.server.Tail(8000))
	}
	v.server.Stop(10 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, gvr := range []schema.GroupVersionResource{backupGVR, restoreGVR, dbrGVR, bslGVR} {
		list, err := v.env.Dynamic.Resource(gvr).Namespace(veleroNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("list %s: %v", gvr.Resource, err)
			continue
		}
		for _, o := range list.Items {
			if len(o.GetFinalizers()) > 0 {
				o.SetFinalizers(nil)
				_, _ = v.env.Dynamic.Resource(gvr).Namespace(veleroNS).Update(ctx, &o, metav1.UpdateOptions{})
			}
			_ = v.env.Dynamic.Resource(gvr).Namespace(veleroNS).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
	}
}

// cli runs the velero command against the plane's cluster and namespace.
func (v *velero) cli(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, v.bin, append(args, "--kubeconfig", v.env.Kubeconfig, "--namespace", veleroNS)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("velero %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// status is what a Backup or Restore reports: its phase and item counts.
type status struct {
	Phase               string
	ItemsDone, ItemsAll int64
	Warnings, Errors    int64
	SnapshotsAttempted  int64
	SnapshotsCompleted  int64
	FailureReason       string
	ValidationErrors    []string
	OperationsAttempted int64
	OperationsCompleted int64
	OperationsFailed    int64
	Started, Completed  time.Time
	name, kind          string
}

func (s status) String() string {
	out := fmt.Sprintf("%s %s: phase %s, items %d/%d, warnings %d, errors %d", s.kind, s.name, s.Phase, s.ItemsDone, s.ItemsAll, s.Warnings, s.Errors)
	if s.kind == "backup" {
		out += fmt.Sprintf(", CSI snapshots %d/%d", s.SnapshotsCompleted, s.SnapshotsAttempted)
	}
	if s.OperationsAttempted > 0 {
		out += fmt.Sprintf(", async operations %d/%d (%d failed)", s.OperationsCompleted, s.OperationsAttempted, s.OperationsFailed)
	}
	if !s.Completed.IsZero() && !s.Started.IsZero() {
		out += fmt.Sprintf(", took %v", s.Completed.Sub(s.Started))
	}
	if s.FailureReason != "" {
		out += ", failure: " + s.FailureReason
	}
	if len(s.ValidationErrors) > 0 {
		out += ", validation errors: " + strings.Join(s.ValidationErrors, "; ")
	}
	return out
}

func (v *velero) get(ctx context.Context, gvr schema.GroupVersionResource, name string) (status, error) {
	u, err := v.env.Dynamic.Resource(gvr).Namespace(veleroNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return status{}, err
	}
	s := status{name: name, kind: strings.TrimSuffix(gvr.Resource, "s")}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	str := func(k ...string) string { v, _, _ := unstructured.NestedString(st, k...); return v }
	num := func(k ...string) int64 { v, _, _ := unstructured.NestedInt64(st, k...); return v }
	tm := func(k string) time.Time { t, _ := time.Parse(time.RFC3339, str(k)); return t }
	s.Phase = str("phase")
	s.ItemsDone, s.ItemsAll = num("progress", "itemsBackedUp"), num("progress", "totalItems")
	if s.kind == "restore" {
		s.ItemsDone = num("progress", "itemsRestored")
	}
	s.Warnings, s.Errors = num("warnings"), num("errors")
	s.SnapshotsAttempted, s.SnapshotsCompleted = num("csiVolumeSnapshotsAttempted"), num("csiVolumeSnapshotsCompleted")
	s.OperationsAttempted = num("backupItemOperationsAttempted") + num("restoreItemOperationsAttempted")
	s.OperationsCompleted = num("backupItemOperationsCompleted") + num("restoreItemOperationsCompleted")
	s.OperationsFailed = num("backupItemOperationsFailed") + num("restoreItemOperationsFailed")
	s.FailureReason = str("failureReason")
	s.ValidationErrors, _, _ = unstructured.NestedStringSlice(st, "validationErrors")
	s.Started, s.Completed = tm("startTimestamp"), tm("completionTimestamp")
	return s, nil
}

// finalPhases end a backup or a restore.
var finalPhases = map[string]bool{"Completed": true, "PartiallyFailed": true, "Failed": true, "FailedValidation": true}

// wait polls a Backup or Restore until its phase is final.
func (v *velero) wait(t *testing.T, gvr schema.GroupVersionResource, name string, timeout time.Duration) status {
	t.Helper()
	var s status
	framework.Eventually(t, timeout, gvr.Resource+" "+name+" done", func() (bool, error) {
		var err error
		s, err = v.get(context.Background(), gvr, name)
		return err == nil && finalPhases[s.Phase], fmt.Errorf("%v (%v)", s, err)
	})
	return s
}

// backup runs `velero backup create NAME --include-namespaces NS [ARGS]`
// and, with wait, waits until it is done.
func (v *velero) backup(t *testing.T, name, ns string, wait bool, args ...string) status {
	t.Helper()
	return v.create(t, backupGVR, name, wait, append([]string{"backup", "create", name, "--include-namespaces", ns}, args...))
}

// restore runs `velero restore create NAME --from-backup BACKUP [ARGS]`
// and, with wait, waits until it is done.
func (v *velero) restore(t *testing.T, name, backup string, wait bool, args ...string) status {
	t.Helper()
	return v.create(t, restoreGVR, name, wait, append([]string{"restore", "create", name, "--from-backup", backup}, args...))
}

// create runs the velero command that creates the Backup or Restore name
// and, with wait, waits until it is done and logs its status.
func (v *velero) create(t *testing.T, gvr schema.GroupVersionResource, name string, wait bool, command []string) status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := v.cli(ctx, command...); err != nil {
		t.Fatal(err)
	}
	if !wait {
		return status{}
	}
	s := v.wait(t, gvr, name, 5*time.Minute)
	t.Logf("%v", s)
	return s
}

// deleteBackups runs `velero backup delete --confirm` and waits until the
// backups are gone (Velero has then deleted their snapshots).
func (v *velero) deleteBackups(t *testing.T, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := v.cli(ctx, append([]string{"backup", "delete", "--confirm"}, names...)...); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "backups "+strings.Join(names, ", ")+" deleted", func() (bool, error) {
		for _, n := range names {
			_, err := v.env.Dynamic.Resource(backupGVR).Namespace(veleroNS).Get(context.Background(), n, metav1.GetOptions{})
			if err == nil {
				return false, fmt.Errorf("backup %s still there", n)
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}
