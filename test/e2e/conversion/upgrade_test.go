// Package conversion runs the upgrade of a cluster whose group snapshots
// were stored as v1beta1 (the community v8.0-era CRDs) to our chart's CRDs
// with the webhook's /convert registered: every group reads at v1 with its
// members, our controller writes nothing to them, and `snapctl
// migrate-storage` rewrites them at the storage version. It has a control
// plane of its own because it replaces the group snapshot CRDs.
package conversion

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/conversion"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	groupPrefix = "/registry/groupsnapshot.storage.k8s.io/"
	groups      = 6 // groups of membersPerGroup claims
	perGroup    = 3
)

var (
	crdGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	contentsGVR  = schema.GroupVersionResource{Group: conversion.Group, Version: conversion.V1beta1, Resource: "volumegroupsnapshotcontents"}
	groupCRDs    = []string{"volumegroupsnapshots", "volumegroupsnapshotcontents", "volumegroupsnapshotclasses"}
	isGroupWrite = func(k framework.WriteKey) bool { return k.Group == conversion.Group }
)

// TestGroupsStoredAsV1beta1UpgradeThroughConversion: groups cut by our
// controller are made to look as a v8.0-era cluster stored them (v1beta1
// objects with a volumeSnapshotHandlePairList in etcd, v1beta1-only CRDs),
// then our chart's CRDs with crds.groupConversion.enabled are applied.
func TestGroupsStoredAsV1beta1UpgradeThroughConversion(t *testing.T) {
	ctx := context.Background()
	sizes := map[string]int64{} // the driver reports each member's size
	for g := range groups {
		for m := range perGroup {
			sizes[fmt.Sprintf("app-%d-data-%d", g, m)] = int64(m+1) << 30
		}
	}
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "conv", NoClass: true, ClaimSizes: sizes,
		ControllerArgs: []string{"--feature-gates=CSIVolumeGroupSnapshot=true"}})
	env := s.Env
	framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create,
		framework.GroupSnapshotClass("conv-"+s.NS, s.Drv.Name, snapv1.VolumeSnapshotContentDelete, true))
	for g := range groups {
		app := fmt.Sprintf("app-%d", g)
		for m := range perGroup {
			claim := fmt.Sprintf("%s-data-%d", app, m)
			s.PVC(t, claim)
			if _, err := env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Patch(ctx, claim, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"app":"`+app+`"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		vgs := &groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: s.NS},
			Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}
		framework.MustCreate(t, env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(s.NS).Create, vgs)
	}
	for g := range groups {
		env.WaitGroupReady(t, s.NS, fmt.Sprintf("app-%d", g), 90*time.Second)
	}
	s.Ctrl.Proc.Stop(10 * time.Second)

	// A v8.0-era cluster: every group object stored as v1beta1, the
	// CRDs serving and storing v1beta1 only.
	stored := storeAsV1beta1(t, env)
	for _, res := range groupCRDs {
		setStoredVersions(t, env, res, `["v1beta1"]`)
	}
	applyCRDs(t, env, v1beta1OnlyCRDs(t))
	for _, c := range v1beta1Contents(t, env) {
		if pairs, _, _ := unstructured.NestedSlice(c.Object, "status", "volumeSnapshotHandlePairList"); len(pairs) != perGroup {
			t.Fatalf("v8.0-era content %s: %d pairs, want %d", c.GetName(), len(pairs), perGroup)
		}
	}

	// The upgrade: the webhook, then our chart's CRDs with conversion.
	w := env.StartWebhook(t)
	start := time.Now()
	applyCRDs(t, env, chartCRDs(t, w))
	for _, res := range groupCRDs {
		if v := storedVersions(t, env, res); v != `["v1beta1","v1beta2"]` {
			t.Fatalf("%s storedVersions %s after the upgrade", res, v)
		}
	}
	before, err := env.APIWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Ctrl = s.StartController(t, s.Args...)
	after, err := env.WaitQuietWrites(ctx, isGroupWrite, 5*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d.Total(isGroupWrite) != 0 {
		t.Errorf("the controller wrote to group objects after the upgrade: %s", d)
	}
	t.Logf("upgrade: %d group objects stored as v1beta1; CRDs applied and controller settled in %v; controller writes after the upgrade: %s",
		stored, time.Since(start).Round(time.Millisecond), after.Sub(before))

	// Every group reads at v1 with its members, filled from their contents.
	checkV1(t, env, s.NS)
	// ... and still at v1beta1, with the pairs.
	for _, c := range v1beta1Contents(t, env) {
		if pairs, _, _ := unstructured.NestedSlice(c.Object, "status", "volumeSnapshotHandlePairList"); len(pairs) != perGroup {
			t.Errorf("content %s at v1beta1: %d pairs", c.GetName(), len(pairs))
		}
	}

	// migrate-storage: a dry run changes nothing, the run rewrites every
	// group object at v1beta2 and trims storedVersions.
	out := snapctl(t, env, "migrate-storage", "--dry-run")
	for _, res := range groupCRDs {
		if v := storedVersions(t, env, res); v != `["v1beta1","v1beta2"]` {
			t.Fatalf("dry run changed %s storedVersions to %s:\n%s", res, v, out)
		}
	}
	if n := countStoredAs(t, env, conversion.V1beta1); n != stored {
		t.Fatalf("dry run rewrote objects: %d of %d still v1beta1:\n%s", n, stored, out)
	}
	before, err = env.APIWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	out = snapctl(t, env, "migrate-storage")
	took := time.Since(start)
	for _, res := range groupCRDs {
		if v := storedVersions(t, env, res); v != `["v1beta2"]` {
			t.Errorf("%s storedVersions %s after migrate-storage:\n%s", res, v, out)
		}
	}
	if n := countStoredAs(t, env, conversion.V1beta1); n != 0 {
		t.Errorf("%d objects still stored as v1beta1 after migrate-storage:\n%s", n, out)
	}
	for key, raw := range mustRange(t, env) {
		if strings.Contains(key, "/volumegroupsnapshotcontents/") && !bytes.Contains(raw, []byte(`"volumeSnapshotInfoList"`)) {
			t.Errorf("%s stored without its member list: %s", key, raw)
		}
	}
	after, err = env.WaitQuietWrites(ctx, isGroupWrite, 3*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrate-storage (all six CRDs; %d group objects): %v, writes %s\n%s", stored, took.Round(time.Millisecond), after.Sub(before), out)
	checkV1(t, env, s.NS)

	samples, err := w.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok, failed := samples.Sum("snapkeeper_webhook_conversions_total", `result="success"`), samples.Sum("snapkeeper_webhook_conversions_total", `result="error"`)
	if ok == 0 || failed != 0 {
		t.Errorf("webhook converted %v objects and failed %v", ok, failed)
	}
	t.Logf("/convert: %v objects converted, %v failed", ok, failed)

	// The groups still live and die as groups.
	for g := range groups {
		if err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(s.NS).Delete(ctx, fmt.Sprintf("app-%d", g), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for g := range groups {
		env.WaitGroupGone(t, s.NS, fmt.Sprintf("app-%d", g), time.Minute)
	}
	s.BackendMatchesContents(t)
	env.WaitBackendGroupsMatchGroupContents(t, s.Drv)
}

// storeAsV1beta1 rewrites every group object in etcd as the v8.0-era
// controller stored it and returns how many there are.
func storeAsV1beta1(t *testing.T, env *framework.Env) int {
	t.Helper()
	kvs := mustRange(t, env)
	for key, raw := range kvs {
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		obj["apiVersion"] = conversion.Group + "/" + conversion.V1beta1
		if status, ok := obj["status"].(map[string]any); ok {
			if infos, ok := status["volumeSnapshotInfoList"].([]any); ok {
				pairs := make([]any, 0, len(infos))
				for _, i := range infos {
					info := i.(map[string]any)
					pairs = append(pairs, map[string]any{"volumeHandle": info["volumeHandle"], "snapshotHandle": info["snapshotHandle"]})
				}
				delete(status, "volumeSnapshotInfoList")
				status["volumeSnapshotHandlePairList"] = pairs
			}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.PutInEtcd(context.Background(), key, b); err != nil {
			t.Fatal(err)
		}
	}
	if want := 2*groups + 1; len(kvs) != want {
		t.Fatalf("%d group objects in etcd, want %d", len(kvs), want)
	}
	return len(kvs)
}

func mustRange(t *testing.T, env *framework.Env) map[string][]byte {
	t.Helper()
	kvs, err := env.EtcdPrefixRange(context.Background(), groupPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

func countStoredAs(t *testing.T, env *framework.Env, version string) int {
	t.Helper()
	n := 0
	for _, raw := range mustRange(t, env) {
		if bytes.Contains(raw, []byte(`"apiVersion":"`+conversion.Group+"/"+version+`"`)) {
			n++
		}
	}
	return n
}

func setStoredVersions(t *testing.T, env *framework.Env, resource, versions string) {
	t.Helper()
	if _, err := env.Dynamic.Resource(crdGVR).Patch(context.Background(), resource+"."+conversion.Group, types.MergePatchType,
		[]byte(`{"status":{"storedVersions":`+versions+`}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

func storedVersions(t *testing.T, env *framework.Env, resource string) string {
	t.Helper()
	crd, err := env.Dynamic.Resource(crdGVR).Get(context.Background(), resource+"."+conversion.Group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	b, _ := json.Marshal(v)
	return string(b)
}

// groupCRDFiles reads the chart's three group snapshot CRDs.
func groupCRDFiles(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, res := range groupCRDs {
		var crd map[string]any
		if err := framework.ReadYAML(filepath.Join(framework.CRDDir(), conversion.Group+"_"+res+".yaml"), &crd); err != nil {
			t.Fatal(err)
		}
		out = append(out, crd)
	}
	return out
}

// v1beta1OnlyCRDs are the group CRDs as the v8.0 era had them: v1beta1
// served and stored, nothing else, no conversion.
func v1beta1OnlyCRDs(t *testing.T) []map[string]any {
	t.Helper()
	crds := groupCRDFiles(t)
	for _, crd := range crds {
		spec := crd["spec"].(map[string]any)
		for _, v := range spec["versions"].([]any) {
			ver := v.(map[string]any)
			if ver["name"] == conversion.V1beta1 {
				ver["storage"], ver["served"] = true, true
				delete(ver, "deprecated")
				delete(ver, "deprecationWarning")
				spec["versions"] = []any{ver}
			}
		}
	}
	return crds
}

// chartCRDs renders the chart's group CRDs with crds.groupConversion on,
// the caBundle of w's CA, and /convert reached at w's loopback address
// (the test API server has no Service routing).
func chartCRDs(t *testing.T, w *framework.Webhook) []map[string]any {
	t.Helper()
	h := framework.NewHelm(t, "")
	out := h.Must(t, "template", "snapkeeper", filepath.Join(framework.RepoRoot(), "charts", "snapkeeper"),
		"--show-only", "templates/crds.yaml", "--set", "crds.groupConversion.enabled=true",
		"--set", "certificates.mode=existingSecret", "--set", "certificates.existingSecret.name=tls",
		"--set", "certificates.existingSecret.caBundle="+base64.StdEncoding.EncodeToString(w.CA.CertPEM))
	var crds []map[string]any
	for _, doc := range strings.Split(out, "\n---") {
		var crd map[string]any
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			t.Fatal(err)
		}
		spec, _ := crd["spec"].(map[string]any)
		if spec == nil || spec["group"] != conversion.Group {
			continue
		}
		client, _, _ := unstructured.NestedMap(crd, "spec", "conversion", "webhook", "clientConfig")
		if client == nil || client["caBundle"] == nil {
			t.Fatalf("chart rendered %s without a conversion webhook:\n%s", crd["metadata"], doc)
		}
		delete(client, "service")
		client["url"] = "https://" + w.Addr + "/convert"
		if err := unstructured.SetNestedMap(crd, client, "spec", "conversion", "webhook", "clientConfig"); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
	}
	if len(crds) != len(groupCRDs) {
		t.Fatalf("chart rendered %d group CRDs, want %d", len(crds), len(groupCRDs))
	}
	return crds
}

func applyCRDs(t *testing.T, env *framework.Env, crds []map[string]any) {
	t.Helper()
	dir := t.TempDir()
	for i, crd := range crds {
		b, err := yaml.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.yaml", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := framework.InstallCRDs(ctx, env.Dynamic, dir); err != nil {
		t.Fatal(err)
	}
}

func v1beta1Contents(t *testing.T, env *framework.Env) []unstructured.Unstructured {
	t.Helper()
	list, err := env.Dynamic.Resource(contentsGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != groups {
		t.Fatalf("%d group contents at v1beta1, want %d", len(list.Items), groups)
	}
	return list.Items
}

// checkV1: every group is ready at v1, and its content lists every member
// with the readiness, size and creation time of the member's own content.
func checkV1(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	ctx := context.Background()
	gs, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs.Items) != groups {
		t.Fatalf("%d groups at v1, want %d", len(gs.Items), groups)
	}
	for _, g := range gs.Items {
		if g.Status == nil || g.Status.ReadyToUse == nil || !*g.Status.ReadyToUse || g.Status.BoundVolumeGroupSnapshotContentName == nil {
			t.Fatalf("group %s at v1: %s", g.Name, framework.JSON(g.Status))
		}
		c, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, *g.Status.BoundVolumeGroupSnapshotContentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Status.VolumeSnapshotInfoList) != perGroup {
			t.Fatalf("content %s at v1: %s", c.Name, framework.JSON(c.Status))
		}
		for _, info := range c.Status.VolumeSnapshotInfoList {
			if info.SnapshotHandle == "" || info.VolumeHandle == "" || info.ReadyToUse == nil || !*info.ReadyToUse ||
				info.CreationTime == nil || info.RestoreSize == nil {
				t.Errorf("content %s at v1: member %s", c.Name, framework.JSON(info))
			}
		}
	}
}

func snapctl(t *testing.T, env *framework.Env, args ...string) string {
	t.Helper()
	bin, err := framework.OwnBinary("./cmd/snapctl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, append(args, "--kubeconfig", env.Kubeconfig)...).CombinedOutput()
	if err != nil {
		t.Fatalf("snapctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
