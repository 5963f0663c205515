package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

var crdNames = []string{
	"volumesnapshotclasses.snapshot.storage.k8s.io",
	"volumesnapshotcontents.snapshot.storage.k8s.io",
	"volumesnapshots.snapshot.storage.k8s.io",
	"volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io",
	"volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io",
	"volumegroupsnapshots.groupsnapshot.storage.k8s.io",
	"snapshotschedules.snapkeeper.io",
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func ptr[T any](v T) *T { return &v }

// snapshotObjects creates a class and a snapshot that must outlive every
// chart operation, and returns a check that they are still there.
func snapshotObjects(t *testing.T, env *framework.Env, ns string) func(stage string) {
	t.Helper()
	class := env.CreateSnapshotClass(t, framework.SnapshotClass("keep-"+ns, framework.MockDriverName, snapv1.VolumeSnapshotContentRetain, false))
	vs := env.CreateSnapshot(t, framework.DynamicSnapshot(ns, "keep", "data", &class.Name))
	return func(stage string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range crdNames {
			crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: CRD %s: %v", stage, n, err)
			}
			if crd.GetDeletionTimestamp() != nil {
				t.Fatalf("%s: CRD %s is being deleted", stage, n)
			}
		}
		if _, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Get(ctx, class.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: class: %v", stage, err)
		}
		if _, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, vs.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: snapshot: %v", stage, err)
		}
	}
}

func crdMeta(t *testing.T, env *framework.Env, name string) metav1.Object {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// The framework applied the CRDs server-side, as kubectl or kustomize
// would: the chart installs over them, and neither upgrade nor uninstall
// removes them or the snapshot objects.
func TestCRDsCreatedByAnotherToolAreAdoptedAndOutliveUpgradeAndUninstall(t *testing.T) {
	env, h := clusterHelm(t)
	ns := env.Namespace(t)
	stillThere := snapshotObjects(t, env, ns)
	base := []string{framework.ChartDir(), "--namespace", ns, "--set", "crds.install=true", "--set", "webhook.enabled=false"}

	// Plain install: Helm refuses objects it does not own.
	out, err := h.Run(context.Background(), append([]string{"install", "owner"}, base...)...)
	if err == nil || !strings.Contains(out, "invalid ownership metadata") {
		t.Fatalf("install over foreign CRDs: err %v, want Helm's ownership error:\n%s", err, out)
	}
	h.Must(t, "uninstall", "owner", "--namespace", ns, "--ignore-not-found")
	stillThere("after the refused install")

	h.Must(t, append([]string{"install", "owner", "--take-ownership"}, base...)...)
	uninstallOnCleanup(t, h, "owner", ns)
	for _, n := range crdNames {
		m := crdMeta(t, env, n)
		if m.GetAnnotations()["meta.helm.sh/release-name"] != "owner" || m.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s not adopted with the keep policy: %v", n, m.GetAnnotations())
		}
	}
	stillThere("after install")

	h.Must(t, append([]string{"upgrade", "owner", "--set", "crds.labels.upgraded=yes"}, base...)...)
	if got := crdMeta(t, env, crdNames[0]).GetLabels()["upgraded"]; got != "yes" {
		t.Errorf("upgrade did not update the CRDs (label %q)", got)
	}
	stillThere("after upgrade")

	out = h.Must(t, "uninstall", "owner", "--namespace", ns)
	if !strings.Contains(out, "kept due to the resource policy") {
		t.Errorf("uninstall does not report the kept CRDs:\n%s", out)
	}
	stillThere("after uninstall")

	// Another release that leaves the CRDs to someone else installs cleanly.
	h.Must(t, "install", "crdless", framework.ChartDir(), "--namespace", ns, "--set", "crds.install=false", "--set", "webhook.enabled=false")
	uninstallOnCleanup(t, h, "crdless", ns)
	stillThere("after an install with crds.install=false")
}

// The README's migration from a chart whose CRD templates lack the keep
// policy (as the piraeus snapshot-controller chart's do), run on a control
// plane of its own: a stand-in for that chart installs the CRDs, snapshot
// objects are created, and the documented commands move the CRDs to
// snapkeeper without deleting a single object.
func TestMigrationFromAChartWhoseCRDsLackTheKeepPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	env, err := framework.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.Stop()
		if !t.Failed() {
			os.RemoveAll(env.Dir)
		}
	})
	// The old chart creates the CRDs itself. A CRD deleted before its
	// storage finished initializing stays Terminating ("could not list
	// instances: storage is (re)initializing", not retried for minutes), so
	// wait until each lists its objects first.
	waitCRDStorage(t, ctx, env)
	for _, n := range crdNames {
		if err := env.Dynamic.Resource(crdGVR).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// CRD deletion waits for the API server's finalizer; on two cores
	// shared with the other test packages that has taken over a minute.
	framework.Eventually(t, 3*time.Minute, "the framework's CRDs to go", func() (bool, error) {
		for _, n := range crdNames {
			crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				if err == nil {
					conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
					err = fmt.Errorf("%s still there, finalizers %v, conditions %v", n, crd.GetFinalizers(), conds)
				}
				return false, err
			}
		}
		return true, nil
	})
	h := framework.NewHelm(t, helmKubeconfig(t, env))
	oldNS, newNS, appNS := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	h.Must(t, "install", "snapshot-controller", legacyChart(t), "--namespace", oldNS, "--wait=false")
	waitServed(t, env)
	stillThere := snapshotObjects(t, env, appNS)

	// 1. Keep the CRDs whatever happens to the old release.
	args := append([]string{"annotate", "crd"}, crdNames...)
	if _, stderr, err := env.Kubectl(ctx, nil, append(args, "helm.sh/resource-policy=keep", "--overwrite")...); err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	// 2. Take the CRDs out of the old release's manifest.
	h.Must(t, "upgrade", "snapshot-controller", legacyChart(t), "--namespace", oldNS, "--reuse-values",
		"--post-renderer", filepath.Join(framework.ChartDir(), "scripts", "drop-crds.sh"))
	if manifest := h.Must(t, "get", "manifest", "snapshot-controller", "--namespace", oldNS); strings.Contains(manifest, "CustomResourceDefinition") {
		t.Fatalf("the old release still lists CRDs:\n%s", manifest)
	}
	stillThere("after removing the CRDs from the old release")
	// 3. Install snapkeeper, adopting the CRDs; its controller shares the
	// old one's Lease namespace, so only one of them works at a time.
	h.Must(t, "install", "snapkeeper", framework.ChartDir(), "--namespace", newNS, "--take-ownership",
		"--set", "controller.leaderElection.namespace="+oldNS)
	stillThere("after installing snapkeeper")
	// 4. Uninstall the old release.
	h.Must(t, "uninstall", "snapshot-controller", "--namespace", oldNS)
	stillThere("after uninstalling the old release")
	for _, n := range crdNames {
		m := crdMeta(t, env, n)
		if m.GetAnnotations()["meta.helm.sh/release-name"] != "snapkeeper" || m.GetLabels()["app.kubernetes.io/part-of"] != "snapkeeper" {
			t.Errorf("%s not adopted: %v %v", n, m.GetAnnotations(), m.GetLabels())
		}
	}
	// And a later uninstall of snapkeeper keeps them too.
	h.Must(t, "uninstall", "snapkeeper", "--namespace", newNS)
	stillThere("after uninstalling snapkeeper")

	readme, err := os.ReadFile(filepath.Join(framework.ChartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(framework.ChartDir(), "scripts", "drop-crds.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(script)) {
		t.Error("README.md does not show scripts/drop-crds.sh as it is")
	}
	for _, step := range []string{"helm.sh/resource-policy=keep --overwrite", "--reuse-values --post-renderer", "--take-ownership"} {
		if !strings.Contains(string(readme), step) {
			t.Errorf("README.md lacks the step %q", step)
		}
	}
}

// legacyChart writes a stand-in for an older snapshot chart: the CRDs as
// plain templates without helm.sh/resource-policy, and a controller.
func legacyChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "legacy")
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: legacy-snapshot-controller\nversion: 1.0.0\n",
		"templates/crds.yaml": `{{- range $path, $_ := .Files.Glob "crd-files/*.yaml" }}
---
{{ $.Files.Get $path }}
{{- end }}
`,
		"templates/controller.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: legacy-snapshot-controller
data:
  role: stands in for the old controller Deployment
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyDir(t, framework.CRDDir(), filepath.Join(dir, "crd-files"))
	return dir
}

func waitServed(t *testing.T, env *framework.Env) {
	t.Helper()
	framework.Eventually(t, time.Minute, "the snapshot CRDs to be served", func() (bool, error) {
		_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, err = env.Snap.SnapshotV1().VolumeSnapshots("default").List(context.Background(), metav1.ListOptions{})
		return err == nil, err
	})
}

// waitCRDStorage waits until every snapshot CRD lists its objects.
func waitCRDStorage(t *testing.T, ctx context.Context, env *framework.Env) {
	t.Helper()
	for _, n := range crdNames {
		crd, err := env.Dynamic.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		plural, group, _ := strings.Cut(n, ".")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			if served, _ := vm["served"].(bool); !served {
				continue
			}
			name, _ := vm["name"].(string)
			gvr := schema.GroupVersionResource{Group: group, Version: name, Resource: plural}
			framework.Eventually(t, time.Minute, "storage of "+gvr.String(), func() (bool, error) {
				_, err := env.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
				return err == nil, err
			})
		}
	}
}
