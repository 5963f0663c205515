package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// driverName is the CSI driver the node suites deploy as pods.
const driverName = "node.csi.snapkeeper.io"

// driverManifests deploy the mock CSI driver the way a driver chart ships
// it: one pod with the driver (keeping each volume's data in a directory
// on the host, publishing it by bind mount, registering itself with the
// kubelet since node-driver-registrar cannot be built here), the real
// csi-provisioner, and our image in the csi-snapshotter sidecar's place
// with that sidecar's usual arguments. A StorageClass and a
// VolumeSnapshotClass for the driver come with it.
var driverManifests = template.Must(template.New("driver").Parse(`
apiVersion: v1
kind: Namespace
metadata:
  name: csi-driver
  labels:
    pod-security.kubernetes.io/enforce: privileged
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: {{.Driver}}
spec:
  attachRequired: false
  podInfoOnMount: false
  volumeLifecycleModes: [Persistent]
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: csi-driver
  namespace: csi-driver
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: csi-driver-sidecars
rules:
  # csi-provisioner
  - apiGroups: [""]
    resources: ["persistentvolumes"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  - apiGroups: [""]
    resources: ["persistentvolumeclaims"]
    verbs: ["get", "list", "watch", "update"]
  - apiGroups: ["storage.k8s.io"]
    resources: ["storageclasses", "csinodes", "volumeattachments"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["snapshot.storage.k8s.io"]
    resources: ["volumesnapshots", "volumesnapshotcontents"]
    verbs: ["get", "list"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["list", "watch", "create", "update", "patch"]
  # the snapshotter sidecar (snapkeeper's CSI side)
  - apiGroups: ["snapshot.storage.k8s.io"]
    resources: ["volumesnapshotclasses"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["snapshot.storage.k8s.io"]
    resources: ["volumesnapshotcontents", "volumesnapshotcontents/status"]
    verbs: ["get", "list", "watch", "update", "patch"]
  - apiGroups: ["groupsnapshot.storage.k8s.io"]
    resources: ["volumegroupsnapshotclasses", "volumegroupsnapshotcontents", "volumegroupsnapshotcontents/status"]
    verbs: ["get", "list", "watch", "update", "patch"]
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: csi-driver-sidecars
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: csi-driver-sidecars
subjects:
  - kind: ServiceAccount
    name: csi-driver
    namespace: csi-driver
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: csi-driver-leases
  namespace: csi-driver
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "watch", "list", "delete", "update", "create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: csi-driver-leases
  namespace: csi-driver
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: csi-driver-leases
subjects:
  - kind: ServiceAccount
    name: csi-driver
    namespace: csi-driver
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: csi-driver
  namespace: csi-driver
spec:
  selector:
    matchLabels: {app: csi-driver}
  template:
    metadata:
      labels: {app: csi-driver}
    spec:
      serviceAccountName: csi-driver
      containers:
        - name: driver
          image: snapkeeper.local/mock-csi-driver:1
          args:
            - --csi-address=/csi/csi.sock
            - --name={{.Driver}}
            - --data-dir={{.DataDir}}
            - --node-id={{.Node}}
            - --disable-attach
            - --allow-member-delete
            - --kubelet-registration-path={{.KubeletDir}}/plugins/{{.Driver}}/csi.sock
            - --plugin-registration-dir=/registration
            - -v=4
          securityContext:
            privileged: true
          volumeMounts:
            - {name: socket-dir, mountPath: /csi}
            - {name: registration-dir, mountPath: /registration}
            - {name: kubelet-dir, mountPath: {{.KubeletDir}}, mountPropagation: Bidirectional}
            - {name: data-dir, mountPath: {{.DataDir}}, mountPropagation: Bidirectional}
        - name: csi-provisioner
          image: snapkeeper.local/csi-provisioner:v6.4.0
          args: ["--v=3", "--csi-address=$(ADDRESS)", "--leader-election", "--feature-gates=Topology=false", "--extra-create-metadata"]
          env:
            - {name: ADDRESS, value: /csi/csi.sock}
          volumeMounts:
            - {name: socket-dir, mountPath: /csi}
        - name: csi-snapshotter
          image: {{.Snapshotter.Image}}
          imagePullPolicy: IfNotPresent
          args:
          {{- range .Snapshotter.Args}}
            - {{printf "%q" .}}
          {{- end}}
          env:
            - {name: ADDRESS, value: /csi/csi.sock}
          volumeMounts:
            - {name: socket-dir, mountPath: /csi}
      volumes:
        - name: socket-dir
          hostPath: {path: {{.KubeletDir}}/plugins/{{.Driver}}, type: DirectoryOrCreate}
        - name: registration-dir
          hostPath: {path: {{.KubeletDir}}/plugins_registry, type: DirectoryOrCreate}
        - name: kubelet-dir
          hostPath: {path: {{.KubeletDir}}, type: Directory}
        - name: data-dir
          hostPath: {path: {{.DataDir}}, type: DirectoryOrCreate}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: node-csi
provisioner: {{.Driver}}
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: node-csi
driver: {{.Driver}}
deletionPolicy: Delete
`))

// deployDriver imports the driver's images and applies driverManifests
// with sidecar in the snapshotter's place; it returns the host directory
// holding the driver's data.
func deployDriver(t *testing.T, sidecar snapshotter) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, img := range []string{"mock-csi-driver.tar", "csi-provisioner.tar", "podtool.tar"} {
		if err := node.ImportImage(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	dataDir, err := node.SharedDir("csi-data")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := driverManifests.Execute(&buf, map[string]any{
		"Driver": driverName, "Node": framework.NodeName, "KubeletDir": node.KubeletDir, "DataDir": dataDir, "Snapshotter": sidecar,
	}); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := env.Kubectl(ctx, &buf, "apply", "-f", "-"); err != nil {
		t.Fatalf("deploy the driver: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _, _ = env.Kubectl(ctx, nil, "delete", "daemonset", "csi-driver", "-n", "csi-driver", "--wait")
	})
	// Registered with the kubelet: the CSINode lists the driver.
	err = framework.Poll(2*time.Minute, "driver registered on the node", func() (bool, error) {
		n, err := env.Kube.StorageV1().CSINodes().Get(ctx, framework.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, d := range n.Spec.Drivers {
			if d.Name == driverName {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		out, _, _ := env.Kubectl(ctx, nil, "get", "pods,events", "-n", "csi-driver", "-o", "wide")
		t.Fatalf("%v\n%s", err, out)
	}
	return dataDir
}

// TestSnapshotThroughPods writes data from a pod to a claim of the driver
// pod, snapshots the claim through the chart's binder and our CSI side
// sitting in the driver's pod, restores it into a new claim, and reads the
// same bytes from another pod. Deleting everything removes the backend
// snapshot and both volumes.
func TestSnapshotThroughPods(t *testing.T) {
	tag := ourImage(t)
	installChart(t, framework.ChartDir(), tag)
	dataDir := deployDriver(t, ourSnapshotter(tag))

	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	text := writeThroughPod(t, ctx, ns, "data", nil)
	snapshotAndRestore(t, ctx, ns, "data", dataDir, text)
	removeAllThroughPods(t, ctx, ns, dataDir)
}

// writeThroughPod creates claim name (with labels) and a pod "writer" that
// writes a line naming the test to /data/file in it; it returns the line.
func writeThroughPod(t *testing.T, ctx context.Context, ns, name string, labels map[string]string) string {
	t.Helper()
	text := fmt.Sprintf("written by %s at %s", t.Name(), time.Now().Format(time.RFC3339Nano))
	claim(t, ctx, ns, name, nil)
	if len(labels) > 0 {
		// A merge patch: the claim's controllers write it meanwhile.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err == nil {
			_, err = env.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	podWithClaim(t, ctx, ns, "writer", name, []string{"/podtool", "write", "/data/file", text})
	t.Logf("writer Running %v after its claim was created", time.Since(start).Round(time.Millisecond))
	return text
}

// snapshotAndRestore snapshots claim source as "snap" (class node-csi),
// checks that the driver keeps the snapshot's data, restores it into claim
// "restored" and reads text back from a pod "reader" mounting it.
func snapshotAndRestore(t *testing.T, ctx context.Context, ns, source, dataDir, text string) {
	t.Helper()
	start := time.Now()
	cls := "node-csi"
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptrTo(source)}, VolumeSnapshotClassName: &cls},
	}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var handle string
	err := framework.Poll(2*time.Minute, "snapshot ready", func() (bool, error) {
		got, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, "snap", metav1.GetOptions{})
		if err != nil || got.Status == nil || got.Status.ReadyToUse == nil || !*got.Status.ReadyToUse {
			return false, err
		}
		c, err := env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *got.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil || c.Status == nil || c.Status.SnapshotHandle == nil {
			return false, err
		}
		handle = *c.Status.SnapshotHandle
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}
	t.Logf("snapshot ready %v after create, handle %s", time.Since(start).Round(time.Millisecond), handle)
	if _, err := os.Stat(filepath.Join(dataDir, "snapshots", handle)); err != nil {
		t.Errorf("the driver keeps no data for snapshot %s: %v", handle, err)
	}

	start = time.Now()
	claim(t, ctx, ns, "restored", &corev1.TypedLocalObjectReference{APIGroup: ptrTo(snapv1.GroupName), Kind: "VolumeSnapshot", Name: "snap"})
	podWithClaim(t, ctx, ns, "reader", "restored", []string{"/podtool", "serve"})
	got, stderr, err := env.Kubectl(ctx, nil, "exec", "-n", ns, "reader", "--", "/podtool", "cat", "/data/file")
	if err != nil {
		t.Fatalf("read the restored data: %v\n%s", err, stderr)
	}
	if got != text {
		t.Errorf("restored claim holds %q, want %q", got, text)
	}
	t.Logf("restored claim mounted and read back %d bytes %v after its claim was created", len(got), time.Since(start).Round(time.Millisecond))
}

// removeAllThroughPods deletes the namespace's pods, snapshots and claims
// and waits until the driver holds no snapshot and no volume.
func removeAllThroughPods(t *testing.T, ctx context.Context, ns, dataDir string) {
	t.Helper()
	grace := int64(1)
	if err := env.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Snap.SnapshotV1().VolumeSnapshots(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(3*time.Minute, "backend data removed", func() (bool, error) {
		left := append(entries(filepath.Join(dataDir, "snapshots")), entries(filepath.Join(dataDir, "volumes"))...)
		return len(left) == 0, fmt.Errorf("left on the backend: %v", left)
	})
	if err != nil {
		t.Errorf("%v\n%s", err, driverLogs(t))
	}
}

// claim creates a 1Mi claim of the driver's StorageClass, restored from
// source when set, and waits until it is Bound.
func claim(t *testing.T, ctx context.Context, ns, name string, source *corev1.TypedLocalObjectReference) {
	t.Helper()
	sc := "node-csi"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			DataSource:       source,
		},
	}
	if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(2*time.Minute, "claim "+name+" Bound", func() (bool, error) {
		c, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, driverLogs(t))
	}
}

// podWithClaim runs podtool with args in a pod mounting claim at /data
// and waits until it runs.
func podWithClaim(t *testing.T, ctx context.Context, ns, name, claim string, args []string) {
	t.Helper()
	nonRoot, uid := true, int64(65532)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot, RunAsUser: &uid, FSGroup: &uid},
			Containers: []corev1.Container{{
				Name: "app", Image: "snapkeeper.local/podtool:1", ImagePullPolicy: corev1.PullNever, Command: args,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(3*time.Minute, "pod "+name+" Running", func() (bool, error) {
		got, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s failed: %s", name, got.Status.Message)
		}
		return ready(got), nil
	})
	if err != nil {
		out, _, _ := env.Kubectl(ctx, nil, "describe", "pod", "-n", ns, name)
		t.Fatalf("%v\n%s\n%s", err, out, driverLogs(t))
	}
}

// driverLogs is the tail of the driver pod's containers' logs.
func driverLogs(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, c := range []string{"driver", "csi-provisioner", "csi-snapshotter"} {
		out, stderr, err := env.Kubectl(ctx, nil, "logs", "-n", "csi-driver", "daemonset/csi-driver", "-c", c, "--tail=30")
		fmt.Fprintf(&b, "--- %s (err %v %s)\n%s\n", c, err, stderr, out)
	}
	return b.String()
}

func entries(dir string) []string {
	es, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return []string{err.Error()}
	}
	var out []string
	for _, e := range es {
		out = append(out, filepath.Join(filepath.Base(dir), e.Name()))
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
