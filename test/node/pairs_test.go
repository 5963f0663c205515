package node

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// snapshotter is the image and arguments of the driver pod's snapshotter
// sidecar.
type snapshotter struct {
	Image string
	Args  []string
}

// sidecarArgs are the community csi-snapshotter's usual arguments, as a
// driver chart passes them; both images take them. No --feature-gates:
// group snapshots are on by default since v8.7.0, in both.
var sidecarArgs = []string{"--v=5", "--csi-address=$(ADDRESS)", "--leader-election", "--extra-create-metadata"}

// ourSnapshotter is our image in the sidecar's place.
func ourSnapshotter(tag string) snapshotter {
	return snapshotter{Image: "ghcr.io/snapkeeper/snapkeeper:" + tag, Args: sidecarArgs}
}

// communitySnapshotter is the community csi-snapshotter
// (framework.CommunityVersion, `make node-images`).
func communitySnapshotter() snapshotter {
	return snapshotter{Image: "snapkeeper.local/csi-snapshotter:" + framework.CommunityVersion(), Args: sidecarArgs}
}

// installChart installs chart (this tree's, or the previous release's) as
// docs/quickstart.md says (the image's tag is the only value) into the Pod
// Security "restricted" namespace and uninstalls it when the test ends.
func installChart(t *testing.T, chart, tag string) {
	t.Helper()
	h := framework.NewHelm(t, env.Kubeconfig)
	restrictedNamespace(t)
	if out, err := h.Run(context.Background(), "install", release, chart, "--namespace", namespace,
		"--set", "image.tag="+tag, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, podReport(t))
	}
	t.Cleanup(func() { _, _ = h.Run(context.Background(), "uninstall", release, "--namespace", namespace, "--wait") })
}

// communityController is the community snapshot-controller
// (framework.CommunityVersion, the image tag below) as its own deployment
// manifests run it: one replica with leader election (group snapshots are
// on by default), allowed what it reads and writes.
const communityController = `
apiVersion: v1
kind: Namespace
metadata:
  name: community-snapshotter
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: snapshot-controller
  namespace: community-snapshotter
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: community-snapshot-controller
rules:
  - apiGroups: [""]
    resources: ["persistentvolumes"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["persistentvolumeclaims"]
    verbs: ["get", "list", "watch", "update", "patch"]
  - apiGroups: ["storage.k8s.io"]
    resources: ["storageclasses"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["list", "watch", "create", "update", "patch"]
  - apiGroups: ["snapshot.storage.k8s.io", "groupsnapshot.storage.k8s.io"]
    resources: ["*"]
    verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: community-snapshot-controller
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: community-snapshot-controller
subjects:
  - kind: ServiceAccount
    name: snapshot-controller
    namespace: community-snapshotter
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: snapshot-controller-leases
  namespace: community-snapshotter
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "watch", "list", "delete", "update", "create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: snapshot-controller-leases
  namespace: community-snapshotter
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: snapshot-controller-leases
subjects:
  - kind: ServiceAccount
    name: snapshot-controller
    namespace: community-snapshotter
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: snapshot-controller
  namespace: community-snapshotter
spec:
  replicas: 1
  selector:
    matchLabels: {app: snapshot-controller}
  template:
    metadata:
      labels: {app: snapshot-controller}
    spec:
      serviceAccountName: snapshot-controller
      containers:
        - name: snapshot-controller
          image: snapkeeper.local/snapshot-controller:COMMUNITY_VERSION
          imagePullPolicy: Never
          args: ["--v=5", "--leader-election=true"]
`

// communityManifest is communityController with the community version's
// image.
func communityManifest() string {
	return strings.ReplaceAll(communityController, "COMMUNITY_VERSION", framework.CommunityVersion())
}

// installCommunity installs the snapshot CRDs (the chart's files, which
// are the community's) and the community snapshot-controller, and removes
// the controller when the test ends.
func installCommunity(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, img := range []string{"snapshot-controller.tar", "csi-snapshotter.tar"} {
		if err := node.ImportImage(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	crds := filepath.Join(framework.ChartDir(), "files", "crds")
	if _, stderr, err := env.Kubectl(ctx, nil, "apply", "--server-side", "--force-conflicts", "-f", crds); err != nil {
		t.Fatalf("kubectl apply the CRDs: %v\n%s", err, stderr)
	}
	if _, stderr, err := env.Kubectl(ctx, strings.NewReader(communityManifest()), "apply", "-f", "-"); err != nil {
		t.Fatalf("deploy the community snapshot-controller: %v\n%s", err, stderr)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _, _ = env.Kubectl(ctx, strings.NewReader(communityManifest()), "delete", "-f", "-", "--wait")
	})
	err := framework.Poll(2*time.Minute, "community snapshot-controller available", func() (bool, error) {
		d, err := env.Kube.AppsV1().Deployments("community-snapshotter").Get(ctx, "snapshot-controller", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, nil
	})
	if err != nil {
		out, _, _ := env.Kubectl(ctx, nil, "get", "pods,events", "-n", "community-snapshotter", "-o", "wide")
		t.Fatalf("%v\n%s", err, out)
	}
}
