package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestSecretsNeverLeak plants a distinctive value in the Secrets classes
// and a content name (the snapshotter secret, used by CreateSnapshot and
// DeleteSnapshot; the list secret, used by ListSnapshots; a pre-provisioned
// content's deletion secret; a group class's group secrets), runs the controller and the
// webhook at -v=10, creates, reads (pre-provisioned) and deletes snapshots
// while the driver fails some calls, and then looks for the value, raw,
// base64-encoded (as in a JSON body) and inside hex dumps (as client-go
// logs a protobuf body), in: both processes' logs, every event, every
// snapshot object, class, claim, volume, Lease and namespace, and both
// /metrics endpoints. The driver is the third party the secrets are for:
// its own log is not ours and is not searched.
func TestSecretsNeverLeak(t *testing.T) {
	rng := newRand(t)
	planted := fmt.Sprintf("planted-S3cr3t-%08x", rng.Uint32())
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "secrets", NoClass: true, NoController: true})
	env := s.Env
	ctx := context.Background()
	wh := env.StartWebhook(t, "-v=10")
	for name, key := range map[string]string{"snap-creds": "snap-key", "list-creds": "list-key", "del-creds": "del-key", "group-creds": "group-key"} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: name}, Data: map[string][]byte{key: []byte(planted)}}
		framework.MustCreate(t, env.Kube.CoreV1().Secrets(s.NS).Create, sec)
	}
	class := framework.SnapshotClass("class-"+s.NS, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, false)
	class.Parameters = map[string]string{
		snapshot.ParamSecretName: "snap-creds", snapshot.ParamSecretNamespace: "${volumesnapshot.namespace}",
		snapshot.ParamListSecretName: "list-creds", snapshot.ParamListSecretNamespace: "${volumesnapshot.namespace}",
	}
	env.CreateSnapshotClass(t, class) // judged by the webhook
	s.Class = class.Name
	ctrl := s.StartController(t, append(s.Args, "-v=10", "--feature-gates=CSIVolumeGroupSnapshot=true")...)
	w := newWorld(s)
	w.addController(ctrl)
	preID := cutDirect(t, s.Drv.Socket, "pre-"+s.NS) // before the faults
	s.Drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{
		{Method: "CreateSnapshot", Code: "Internal", Times: 1, Message: "injected by the secrets test"},
		{Method: "ListSnapshots", Code: "Internal", Times: 1, Message: "injected by the secrets test"},
		{Method: "DeleteSnapshot", Code: "Unavailable", Times: 2, Message: "injected by the secrets test"},
	}})

	s.PVC(t, "data")
	for _, n := range []string{"dyn-1", "dyn-2"} {
		if err := w.create(ctx, n, "data"); err != nil {
			t.Fatal(err)
		}
	}
	createPreProvisioned(t, w, "pre", preID)
	for _, n := range []string{"dyn-1", "dyn-2", "pre"} {
		s.WaitReady(t, n, time.Minute)
	}
	for _, n := range []string{"dyn-1", "dyn-2", "pre"} {
		if err := w.remove(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	takeGroupSnapshot(t, s)
	w.checkInvariants(t, time.Minute)
	env.WaitBackendGroupsMatchGroupContents(t, s.Drv)
	keys := secretKeysByMethod(s.Drv.CallLog(t, 0))
	for method, key := range map[string]string{"CreateSnapshot": "snap-key", "ListSnapshots": "list-key", "DeleteSnapshot": "del-key",
		"CreateVolumeGroupSnapshot": "group-key", "DeleteVolumeGroupSnapshot": "group-key"} {
		if !slices.Contains(keys[method], key) {
			t.Errorf("no %s carried secret key %s (saw %v): the test would show nothing", method, key, keys[method])
		}
	}
	t.Logf("secret keys the driver received, by call: %v; calls: %v", keys, callSummary(s.Drv.Calls(t)))

	sources := map[string][]byte{}
	for name, p := range map[string]string{"controller log": ctrl.Proc.LogPath, "webhook log": wh.Proc.LogPath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sources[name] = b
	}
	sources["controller /metrics"] = scrapeBody(t, http.DefaultClient, "http://"+ctrl.HTTPAddr+"/metrics")
	sources["webhook /metrics"] = scrapeBody(t, wh.Client(), "https://"+wh.Addr+"/metrics")
	for k, v := range apiObjects(t, env) {
		sources[k] = v
	}
	hits := 0
	for name, b := range sources {
		for _, f := range findSecret(b, planted) {
			hits++
			t.Errorf("%s holds the planted secret (%s)", name, f)
		}
	}
	t.Logf("searched %d sources (controller log %d bytes, webhook log %d bytes at -v=10) for %q: %d hits",
		len(sources), len(sources["controller log"]), len(sources["webhook log"]), planted, hits)
}

// takeGroupSnapshot takes a group snapshot of a claim with a group class
// whose group secrets are group-creds, waits until it is ready and deletes
// it.
func takeGroupSnapshot(t *testing.T, s *framework.Scenario) {
	t.Helper()
	ctx := context.Background()
	groups := s.Env.Snap.GroupsnapshotV1()
	gc := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "group-class-" + s.NS},
		Driver: s.Drv.Name, DeletionPolicy: snapv1.VolumeSnapshotContentDelete, Parameters: map[string]string{
			snapshot.ParamGroupSecretName: "group-creds", snapshot.ParamGroupSecretNamespace: "${volumegroupsnapshot.namespace}",
			snapshot.ParamGroupGetSecretName: "group-creds", snapshot.ParamGroupGetSecretNamespace: "${volumegroupsnapshot.namespace}",
		}}
	framework.MustCreate(t, groups.VolumeGroupSnapshotClasses().Create, gc)
	t.Cleanup(func() {
		_ = groups.VolumeGroupSnapshotClasses().Delete(context.Background(), gc.Name, metav1.DeleteOptions{})
	})
	s.PVC(t, "grp")
	label := []byte(`{"metadata":{"labels":{"secrets-test":"grp"}}}`)
	if _, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Patch(ctx, "grp", types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	g := &groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: "grp"},
		Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: &gc.Name, Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"secrets-test": "grp"}}}}}
	framework.MustCreate(t, groups.VolumeGroupSnapshots(s.NS).Create, g)
	s.Env.WaitGroupReady(t, s.NS, "grp", time.Minute)
	if err := groups.VolumeGroupSnapshots(s.NS).Delete(ctx, "grp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Env.WaitGroupGone(t, s.NS, "grp", time.Minute)
}

// createPreProvisioned creates a Delete content for backend snapshot id
// that names the del-creds Secret for its deletion, and VolumeSnapshot name
// of the scenario's class bound to it.
func createPreProvisioned(t *testing.T, w *world, name, id string) {
	t.Helper()
	s := w.s
	content, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Create(context.Background(), &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "pre-" + s.NS, Annotations: map[string]string{
			snapshot.AnnDeletionSecretName: "del-creds", snapshot.AnnDeletionSecretNamespace: s.NS}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.NS, Name: name},
			DeletionPolicy:    snapv1.VolumeSnapshotContentDelete, Driver: s.Drv.Name,
			// The class (and its list secret) from the start: the binder
			// copies it only when it binds.
			VolumeSnapshotClassName: &s.Class,
			Source:                  snapv1.VolumeSnapshotContentSource{SnapshotHandle: &id},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vs := s.Env.CreateSnapshot(t, &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: name},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content.Name}, VolumeSnapshotClassName: &s.Class}})
	w.created(name, vs.UID)
}

// cutDirect cuts a backend snapshot on the driver without the controller,
// for a pre-provisioned content, and returns its id.
func cutDirect(t *testing.T, socket, name string) string {
	t.Helper()
	snap, err := framework.CutSnapshot(context.Background(), socket, name, "vol-"+name, 30*time.Second)
	if err != nil {
		t.Fatalf("cutting a backend snapshot: %v", err)
	}
	return snap.GetSnapshotId()
}

// secretKeysByMethod lists the secret keys each CSI method received.
func secretKeysByMethod(log framework.CallLog) map[string][]string {
	out := map[string][]string{}
	for _, e := range log.Entries {
		for _, k := range e.SecretKeys {
			if !slices.Contains(out[e.Method], k) {
				out[e.Method] = append(out[e.Method], k)
			}
		}
	}
	return out
}

func scrapeBody(t *testing.T, c *http.Client, url string) []byte {
	t.Helper()
	b, err := framework.ScrapeBody(context.Background(), c, url)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
