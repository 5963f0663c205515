package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	grVolumeSnapshotClasses       = migrateCRDs[0]
	grVolumeSnapshotContents      = migrateCRDs[1]
	grVolumeSnapshots             = migrateCRDs[2]
	grVolumeGroupSnapshotClasses  = migrateCRDs[3]
	grVolumeGroupSnapshotContents = migrateCRDs[4]
	grVolumeGroupSnapshots        = migrateCRDs[5]
)

var migrateKinds = map[schema.GroupResource]string{
	grVolumeSnapshotClasses:       "VolumeSnapshotClass",
	grVolumeSnapshotContents:      "VolumeSnapshotContent",
	grVolumeSnapshots:             "VolumeSnapshot",
	grVolumeGroupSnapshotClasses:  "VolumeGroupSnapshotClass",
	grVolumeGroupSnapshotContents: "VolumeGroupSnapshotContent",
	grVolumeGroupSnapshots:        "VolumeGroupSnapshot",
}

// testCRD is a live CRD of gr: the group CRDs serve v1beta1, v1beta2 and
// v1 and store v1beta2, as ours; the snapshot CRDs store v1 and keep
// v1beta1 unserved.
func testCRD(gr schema.GroupResource, storedVersions ...string) *unstructured.Unstructured {
	versions := []any{
		map[string]any{"name": "v1", "served": true, "storage": true},
		map[string]any{"name": "v1beta1", "served": false, "storage": false},
	}
	if gr.Group == "groupsnapshot.storage.k8s.io" {
		versions = []any{
			map[string]any{"name": "v1", "served": true, "storage": false},
			map[string]any{"name": "v1beta1", "served": true, "storage": false},
			map[string]any{"name": "v1beta2", "served": true, "storage": true},
		}
	}
	stored := make([]any, len(storedVersions))
	for i, v := range storedVersions {
		stored[i] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": gr.String(), "resourceVersion": "42"},
		"spec": map[string]any{
			"group":    gr.Group,
			"names":    map[string]any{"kind": migrateKinds[gr], "plural": gr.Resource},
			"versions": versions,
		},
		"status": map[string]any{"storedVersions": stored},
	}}
}

// testObject is an object of gr as listed at version.
func testObject(gr schema.GroupResource, version, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"driver": "hostpath.csi.k8s.io"},
	}}
	u.SetAPIVersion(gr.Group + "/" + version)
	u.SetKind(migrateKinds[gr])
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetResourceVersion("7")
	return u
}

// migrateClient is a fake cluster of objs that answers a dry-run update
// with the object, storing nothing, as an API server does.
func migrateClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	listKinds := map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"}
	for gr, kind := range migrateKinds {
		for _, v := range []string{"v1", "v1beta1", "v1beta2"} {
			listKinds[gr.WithVersion(v)] = kind + "List"
		}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if ua := a.(clienttesting.UpdateActionImpl); len(ua.UpdateOptions.DryRun) > 0 {
			return true, ua.GetObject(), nil
		}
		return false, nil, nil
	})
	return client
}

// pagedClient lists in pages, which the fake does not (its actions drop
// Limit and Continue): sorted by namespace/name, the continue token the
// index of the next object. It records each list's options, and a list
// that expire answers with an error fails so.
type pagedClient struct {
	dynamic.Interface
	mu     sync.Mutex
	lists  []pagedList
	expire func(pagedList) error
}

type pagedList struct {
	gvr  schema.GroupVersionResource
	opts metav1.ListOptions
}

func (c *pagedClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := c.Interface.Resource(gvr)
	if gvr == crdResource {
		return r
	}
	return pagedResource{r, c, gvr}
}

type pagedResource struct {
	dynamic.NamespaceableResourceInterface
	c   *pagedClient
	gvr schema.GroupVersionResource
}

func (r pagedResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	call := pagedList{r.gvr, opts}
	r.c.mu.Lock()
	r.c.lists = append(r.c.lists, call)
	r.c.mu.Unlock()
	if r.c.expire != nil {
		if err := r.c.expire(call); err != nil {
			return nil, err
		}
	}
	list, err := r.NamespaceableResourceInterface.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	})
	start, end := 0, len(list.Items)
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	if limit := int(opts.Limit); limit > 0 && start+limit < end {
		end = start + limit
		list.SetContinue(strconv.Itoa(end))
	}
	list.Items = list.Items[start:end]
	return list, nil
}

// failUpdates makes the update of the object name fail with err.
func failUpdates(client *dynamicfake.FakeDynamicClient, name string, err error) {
	client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.UpdateActionImpl).GetObject().(*unstructured.Unstructured).GetName() == name {
			return true, nil, err
		}
		return false, nil, nil
	})
}

// clusterFixture is every CRD, with storedVersions left over from older
// CRDs except on volumesnapshots, and objects at the storage versions;
// the v1 group snapshot "decoy" is what a read at a served version other
// than the storage version would see (the fake does not convert).
func clusterFixture() []runtime.Object {
	return []runtime.Object{
		testCRD(grVolumeSnapshotClasses, "v1beta1", "v1"),
		testCRD(grVolumeSnapshotContents, "v1beta1", "v1"),
		testCRD(grVolumeSnapshots, "v1"),
		testCRD(grVolumeGroupSnapshotClasses, "v1beta1", "v1beta2"),
		testCRD(grVolumeGroupSnapshotContents, "v1beta1", "v1beta2"),
		testCRD(grVolumeGroupSnapshots, "v1beta1", "v1beta2"),
		testObject(grVolumeSnapshotClasses, "v1", "", "fast"),
		testObject(grVolumeSnapshots, "v1", "team-a", "db"),
		testObject(grVolumeSnapshots, "v1", "team-b", "web"),
		testObject(grVolumeGroupSnapshotClasses, "v1beta2", "", "group-fast"),
		testObject(grVolumeGroupSnapshotContents, "v1beta2", "", "groupcontent-1"),
		testObject(grVolumeGroupSnapshotContents, "v1beta2", "", "groupcontent-2"),
		testObject(grVolumeGroupSnapshots, "v1beta2", "team-a", "g1"),
		testObject(grVolumeGroupSnapshots, "v1beta2", "team-a", "g2"),
		testObject(grVolumeGroupSnapshots, "v1beta2", "team-b", "g3"),
		testObject(grVolumeGroupSnapshots, "v1", "team-b", "decoy"),
	}
}

func storageOf(gr schema.GroupResource) string {
	if gr.Group == "groupsnapshot.storage.k8s.io" {
		return "v1beta2"
	}
	return "v1"
}

// runMigration runs migrate-storage --page-size 2 ARGS on client, paged.
func runMigration(t *testing.T, client dynamic.Interface, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if _, ok := client.(*pagedClient); !ok {
		client = &pagedClient{Interface: client}
	}
	var out, errOut bytes.Buffer
	o, err := parseMigrateFlags("snapctl", append([]string{"--page-size", "2"}, args...), &errOut)
	if err != nil {
		t.Fatal(err)
	}
	code = migrateStorage(context.Background(), client, o, "snapctl", &out, &errOut)
	return code, out.String(), errOut.String()
}

// row is the text row of crd, split on spaces.
func row(t *testing.T, stdout, crd string) []string {
	t.Helper()
	for line := range strings.Lines(stdout) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == crd {
			if len(f) != 10 {
				t.Fatalf("row of %s has %d columns: %q", crd, len(f), line)
			}
			return f
		}
	}
	t.Fatalf("no row for %s in\n%s", crd, stdout)
	return nil
}

// wantRow checks a row's columns but TIME.
func wantRow(t *testing.T, stdout string, gr schema.GroupResource, storage string, listed, rewritten, conflicts, gone, failed int, versions, result string) {
	t.Helper()
	got := row(t, stdout, gr.String())
	want := []string{gr.String(), storage, strconv.Itoa(listed), strconv.Itoa(rewritten), strconv.Itoa(conflicts),
		strconv.Itoa(gone), strconv.Itoa(failed), versions, got[8], result}
	if !slices.Equal(got, want) {
		t.Errorf("row\n got %q\nwant %q", got, want)
	}
}

func storedVersions(t *testing.T, client *dynamicfake.FakeDynamicClient, gr schema.GroupResource) []string {
	t.Helper()
	u, err := client.Resource(crdResource).Get(context.Background(), gr.String(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedStringSlice(u.Object, "status", "storedVersions")
	return v
}

// writes are the update and patch actions, in order.
func writes(client *dynamicfake.FakeDynamicClient) (updates []clienttesting.UpdateActionImpl, patches []clienttesting.PatchActionImpl, order []string) {
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case clienttesting.UpdateActionImpl:
			updates = append(updates, a)
			order = append(order, "update "+a.GetResource().GroupResource().String())
		case clienttesting.PatchActionImpl:
			patches = append(patches, a)
			order = append(order, "patch "+a.GetName())
		}
	}
	return updates, patches, order
}

func TestMigrateRewritesAtTheStorageVersionThenTrims(t *testing.T) {
	client := migrateClient(clusterFixture()...)
	paged := &pagedClient{Interface: client}
	code, stdout, stderr := runMigration(t, paged)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	wantRow(t, stdout, grVolumeSnapshotClasses, "v1", 1, 1, 0, 0, 0, "v1beta1,v1->v1", resultTrimmed)
	wantRow(t, stdout, grVolumeSnapshotContents, "v1", 0, 0, 0, 0, 0, "v1beta1,v1->v1", resultTrimmed)
	wantRow(t, stdout, grVolumeSnapshots, "v1", 2, 2, 0, 0, 0, "v1->v1", resultOK)
	wantRow(t, stdout, grVolumeGroupSnapshotClasses, "v1beta2", 1, 1, 0, 0, 0, "v1beta1,v1beta2->v1beta2", resultTrimmed)
	wantRow(t, stdout, grVolumeGroupSnapshotContents, "v1beta2", 2, 2, 0, 0, 0, "v1beta1,v1beta2->v1beta2", resultTrimmed)
	wantRow(t, stdout, grVolumeGroupSnapshots, "v1beta2", 3, 3, 0, 0, 0, "v1beta1,v1beta2->v1beta2", resultTrimmed)
	if !strings.HasPrefix(stdout, "RESOURCE ") {
		t.Errorf("no header first:\n%s", stdout)
	}
	if want := "summary: 6 CRDs (5 trimmed, 1 ok, 0 failed, 0 not-installed), 9 objects listed, 9 rewritten, 0 conflicts, 0 gone, 0 failed, "; !strings.Contains(stdout, "\n"+want) {
		t.Errorf("no summary %q in\n%s", want, stdout)
	}

	// Lists and updates are at the storage version, in pages, and each
	// update is the object as listed, with its resourceVersion.
	var pages []string
	for _, l := range paged.lists {
		if l.gvr.Version != storageOf(l.gvr.GroupResource()) || l.opts.Limit != 2 {
			t.Errorf("list %v with %+v: want the storage version, 2 a page", l.gvr, l.opts)
		}
		pages = append(pages, l.gvr.Resource+"@"+l.opts.Continue)
	}
	if want := []string{"volumesnapshotclasses@", "volumesnapshotcontents@", "volumesnapshots@",
		"volumegroupsnapshotclasses@", "volumegroupsnapshotcontents@", "volumegroupsnapshots@", "volumegroupsnapshots@2"}; !slices.Equal(pages, want) {
		t.Errorf("lists %v, want %v", pages, want)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" && a.GetNamespace() != "" {
			t.Errorf("listed in namespace %q: want all namespaces", a.GetNamespace())
		}
	}
	updates, patches, order := writes(client)
	var updated []string
	for _, u := range updates {
		obj := u.GetObject().(*unstructured.Unstructured)
		gvr := u.GetResource()
		if gvr.Version != storageOf(gvr.GroupResource()) || obj.GetAPIVersion() != gvr.Group+"/"+gvr.Version {
			t.Errorf("update of %s at %v as %s: want the storage version", obj.GetName(), gvr, obj.GetAPIVersion())
		}
		if obj.GetResourceVersion() != "7" || obj.GetNamespace() != u.GetNamespace() || u.GetSubresource() != "" {
			t.Errorf("update of %s: resourceVersion %q, namespace %q/%q, subresource %q", obj.GetName(), obj.GetResourceVersion(), obj.GetNamespace(), u.GetNamespace(), u.GetSubresource())
		}
		if len(u.UpdateOptions.DryRun) != 0 || u.UpdateOptions.FieldManager != migrateFieldManager {
			t.Errorf("update of %s with %+v", obj.GetName(), u.UpdateOptions)
		}
		if d, _, _ := unstructured.NestedString(obj.Object, "spec", "driver"); d != "hostpath.csi.k8s.io" {
			t.Errorf("update of %s changed the object: %v", obj.GetName(), obj.Object)
		}
		updated = append(updated, obj.GetName())
	}
	slices.Sort(updated)
	if want := []string{"db", "fast", "g1", "g2", "g3", "group-fast", "groupcontent-1", "groupcontent-2", "web"}; !slices.Equal(updated, want) {
		t.Errorf("updated %v, want %v", updated, want)
	}

	// storedVersions: a merge patch of the status subresource, conditional
	// on the CRD's resourceVersion, after the CRD's last object.
	if len(patches) != 5 {
		t.Fatalf("%d patches, want 5 (not volumesnapshots, already v1 alone): %v", len(patches), order)
	}
	for _, p := range patches {
		gr := schema.ParseGroupResource(p.GetName())
		storage := storageOf(gr)
		var body map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"metadata": map[string]any{"resourceVersion": "42"}, "status": map[string]any{"storedVersions": []any{storage}}}
		if p.GetResource() != crdResource || p.GetSubresource() != "status" || p.GetPatchType() != types.MergePatchType || fmt.Sprint(body) != fmt.Sprint(want) {
			t.Errorf("patch %s of %v/%s: %s %s", p.GetName(), p.GetResource(), p.GetSubresource(), p.GetPatchType(), p.GetPatch())
		}
		if got := storedVersions(t, client, gr); !slices.Equal(got, []string{storage}) {
			t.Errorf("%s storedVersions %v", gr, got)
		}
		at := slices.Index(order, "patch "+gr.String())
		for i, w := range order {
			if w == "update "+gr.String() && i > at {
				t.Errorf("%s trimmed before its last update: %v", gr, order)
			}
		}
	}
}

func TestMigrateDryRunStoresNothing(t *testing.T) {
	client := migrateClient(clusterFixture()...)
	code, stdout, stderr := runMigration(t, client, "--dry-run")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	wantRow(t, stdout, grVolumeGroupSnapshots, "v1beta2", 3, 3, 0, 0, 0, "v1beta1,v1beta2->v1beta2", resultWouldTrim)
	wantRow(t, stdout, grVolumeSnapshots, "v1", 2, 2, 0, 0, 0, "v1->v1", resultOK)
	if want := "summary (dry run, nothing stored): 6 CRDs (5 would-trim, 1 ok, 0 failed, 0 not-installed), 9 objects listed, 9 rewritten"; !strings.Contains(stdout, want) {
		t.Errorf("no summary %q in\n%s", want, stdout)
	}
	updates, patches, _ := writes(client)
	if len(updates) != 9 || len(patches) != 0 {
		t.Fatalf("%d updates, %d patches: want 9 dry-run updates and no patch", len(updates), len(patches))
	}
	for _, u := range updates {
		if !slices.Equal(u.UpdateOptions.DryRun, []string{metav1.DryRunAll}) {
			t.Errorf("update of %s without dryRun=All: %+v", u.GetObject().(*unstructured.Unstructured).GetName(), u.UpdateOptions)
		}
	}
	if got := storedVersions(t, client, grVolumeGroupSnapshots); !slices.Equal(got, []string{"v1beta1", "v1beta2"}) {
		t.Errorf("storedVersions %v after a dry run", got)
	}
}

func TestMigrateCountsConflictsAndGoneAsMigrated(t *testing.T) {
	client := migrateClient(clusterFixture()...)
	failUpdates(client, "g1", apierrors.NewConflict(grVolumeGroupSnapshots, "g1", fmt.Errorf("the object has been modified")))
	failUpdates(client, "g3", apierrors.NewNotFound(grVolumeGroupSnapshots, "g3"))
	code, stdout, stderr := runMigration(t, client, "--resources", "volumegroupsnapshots")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	wantRow(t, stdout, grVolumeGroupSnapshots, "v1beta2", 3, 1, 1, 1, 0, "v1beta1,v1beta2->v1beta2", resultTrimmed)
	if got := storedVersions(t, client, grVolumeGroupSnapshots); !slices.Equal(got, []string{"v1beta2"}) {
		t.Errorf("storedVersions %v", got)
	}
	if n := strings.Count(stdout, "\n"); n != 3 {
		t.Errorf("%d lines, want the header, one row and the summary:\n%s", n, stdout)
	}
}

func TestMigrateFailureKeepsStoredVersions(t *testing.T) {
	client := migrateClient(clusterFixture()...)
	denied := apierrors.NewForbidden(grVolumeGroupSnapshots, "g2", fmt.Errorf(`admission webhook "x" denied the request`))
	failUpdates(client, "g2", denied)
	var out, errOut bytes.Buffer
	o, err := parseMigrateFlags("kubectl snapkeeper", []string{"-o", "json", "--resources", "volumegroupsnapshots,volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if code := migrateStorage(context.Background(), client, o, "kubectl snapkeeper", &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	if want := "kubectl snapkeeper migrate-storage: volumegroupsnapshots.groupsnapshot.storage.k8s.io team-a/g2: " + denied.Error() + "\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	var report migrationReport
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(report.CRDs) != 2 || report.DryRun {
		t.Fatalf("report %+v", report)
	}
	contents, groups := report.CRDs[0], report.CRDs[1]
	if contents.CRD != grVolumeGroupSnapshotContents.String() || contents.Result != resultTrimmed || contents.Rewritten != 2 {
		t.Errorf("contents %+v: want trimmed, the failure of another CRD does not hold it back", contents)
	}
	if groups.Result != resultFailed || groups.Listed != 3 || groups.Rewritten != 2 || groups.Failed != 1 ||
		!slices.Equal(groups.StoredVersionsAfter, []string{"v1beta1", "v1beta2"}) || len(groups.Errors) != 1 || !strings.HasPrefix(groups.Errors[0], "team-a/g2: ") {
		t.Errorf("groups %+v", groups)
	}
	if got := storedVersions(t, client, grVolumeGroupSnapshots); !slices.Equal(got, []string{"v1beta1", "v1beta2"}) {
		t.Errorf("storedVersions %v after a failure", got)
	}
	_, patches, _ := writes(client)
	if len(patches) != 1 || patches[0].GetName() != grVolumeGroupSnapshotContents.String() {
		t.Errorf("patches %v: want only the contents' CRD", patches)
	}
}

func TestMigrateSkipsAMissingCRD(t *testing.T) {
	client := migrateClient(testCRD(grVolumeGroupSnapshots, "v1beta1", "v1beta2"), testObject(grVolumeGroupSnapshots, "v1beta2", "ns", "g"))
	code, stdout, stderr := runMigration(t, client, "--resources", "volumesnapshots, volumegroupsnapshots")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	wantRow(t, stdout, grVolumeSnapshots, "-", 0, 0, 0, 0, 0, "-", resultNotInstalled)
	wantRow(t, stdout, grVolumeGroupSnapshots, "v1beta2", 1, 1, 0, 0, 0, "v1beta1,v1beta2->v1beta2", resultTrimmed)
	if !strings.Contains(stdout, "summary: 2 CRDs (1 trimmed, 0 ok, 0 failed, 1 not-installed), 1 objects listed") {
		t.Errorf("summary in\n%s", stdout)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().GroupResource() == grVolumeSnapshots {
			t.Errorf("listed %v of a CRD that is not installed", a.GetResource())
		}
	}
}

// A CRD upgrade during the walk changes the storage version: the objects
// were rewritten at the old one, so storedVersions stay.
func TestMigrateKeepsStoredVersionsWhenTheStorageVersionChanged(t *testing.T) {
	client := migrateClient(testCRD(grVolumeGroupSnapshots, "v1beta1", "v1beta2"), testObject(grVolumeGroupSnapshots, "v1beta2", "ns", "g"))
	client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		upgraded := testCRD(grVolumeGroupSnapshots, "v1beta1", "v1beta2", "v1")
		_ = unstructured.SetNestedSlice(upgraded.Object, []any{
			map[string]any{"name": "v1", "served": true, "storage": true},
			map[string]any{"name": "v1beta2", "served": true, "storage": false},
		}, "spec", "versions")
		return false, nil, client.Tracker().Update(crdResource, upgraded, "")
	})
	code, stdout, stderr := runMigration(t, client, "--resources", "volumegroupsnapshots")
	if code != 1 || !strings.Contains(stderr, "the storage version changed from v1beta2 to v1") {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	wantRow(t, stdout, grVolumeGroupSnapshots, "v1beta2", 1, 1, 0, 0, 0, "v1beta1,v1beta2->v1beta1,v1beta2", resultFailed)
	if _, patches, _ := writes(client); len(patches) != 0 {
		t.Errorf("patched: %v", patches)
	}
}

// An expired continue token: the walk goes on with the token the API
// server offers instead.
func TestMigrateContinuesAfterAnExpiredToken(t *testing.T) {
	expired := false
	paged := &pagedClient{Interface: migrateClient(clusterFixture()...), expire: func(l pagedList) error {
		if l.opts.Continue == "2" && !expired {
			expired = true
			err := apierrors.NewResourceExpired("The provided continue parameter is too old")
			err.ErrStatus.Continue = "2"
			return err
		}
		return nil
	}}
	code, stdout, stderr := runMigration(t, paged, "--resources", "volumegroupsnapshots")
	if code != 0 || !expired {
		t.Fatalf("exit %d, expired %v, stderr %q\n%s", code, expired, stderr, stdout)
	}
	wantRow(t, stdout, grVolumeGroupSnapshots, "v1beta2", 3, 3, 0, 0, 0, "v1beta1,v1beta2->v1beta2", resultTrimmed)
}

func TestMigrateFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseMigrateFlags("snapctl", nil, &stderr)
	if err != nil || o.dryRun || o.workers != 4 || o.pageSize != 500 || o.output != "text" || !slices.Equal(o.resources, migrateCRDs) {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	o, err = parseMigrateFlags("snapctl", []string{"--resources=volumegroupsnapshots,VolumeSnapshots.snapshot.storage.k8s.io,volumegroupsnapshots", "--workers", "1", "--dry-run"}, &stderr)
	if err != nil || !o.dryRun || o.workers != 1 || !slices.Equal(o.resources, []schema.GroupResource{grVolumeSnapshots, grVolumeGroupSnapshots}) {
		t.Fatalf("parse %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--resources", "pods"}, {"--workers", "0"}, {"--page-size", "0"}, {"-o", "yaml"}, {"extra"}, {"--nope"}} {
		var out, errOut bytes.Buffer
		code := run("kubectl snapkeeper", append([]string{"migrate-storage"}, bad...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "kubectl snapkeeper migrate-storage: ") ||
			!strings.HasSuffix(errOut.String(), migrateUsage("kubectl snapkeeper")+"\n") || strings.Contains(errOut.String(), "snapctl") {
			t.Errorf("%v: exit %d, stderr %q", bad, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"migrate-storage", "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-dry-run") {
		t.Errorf("-h: exit %d, stderr %q", code, errOut.String())
	}
}

// wireAPI is an API server with one CRD, volumegroupsnapshots stored at
// v1beta2 with v1beta1 left in storedVersions, and one object; any other
// path is NotFound. It records every request.
type wireAPI struct {
	mu       sync.Mutex
	requests []string
	patch    string
	put      map[string]any
}

func (f *wireAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := readBody(r, nil)
	f.mu.Lock()
	// The client's per-request timeout, on every request, is left out.
	q := r.URL.Query()
	if q.Get("timeout") != "1m0s" {
		q.Set("timeout", "missing")
	} else {
		q.Del("timeout")
	}
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+"?"+q.Encode())
	f.mu.Unlock()
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + grVolumeGroupSnapshots.String()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == crdPath:
		answerJSON(w, http.StatusOK, testCRD(grVolumeGroupSnapshots, "v1beta1", "v1beta2").Object)
	case r.Method == http.MethodGet && r.URL.Path == "/apis/groupsnapshot.storage.k8s.io/v1beta2/volumegroupsnapshots":
		answerJSON(w, http.StatusOK, map[string]any{"apiVersion": "groupsnapshot.storage.k8s.io/v1beta2", "kind": "VolumeGroupSnapshotList",
			"metadata": map[string]any{}, "items": []any{testObject(grVolumeGroupSnapshots, "v1beta2", "ns", "g").Object}})
	case r.Method == http.MethodPut && r.URL.Path == "/apis/groupsnapshot.storage.k8s.io/v1beta2/namespaces/ns/volumegroupsnapshots/g":
		f.mu.Lock()
		_ = json.Unmarshal(body, &f.put)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	case r.Method == http.MethodPatch && r.URL.Path == crdPath+"/status":
		f.mu.Lock()
		f.patch = r.Header.Get("Content-Type") + " " + string(body)
		f.mu.Unlock()
		answerJSON(w, http.StatusOK, testCRD(grVolumeGroupSnapshots, "v1beta2").Object)
	default:
		answerJSON(w, http.StatusNotFound, apiStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "not found"))
	}
}

// The requests as an API server receives them, through --kubeconfig.
func TestMigrateOnTheWire(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		t.Run(fmt.Sprint("dry-run=", dryRun), func(t *testing.T) {
			api := &wireAPI{}
			srv := httptest.NewServer(api)
			defer srv.Close()
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			writeFile(t, kubeconfig, "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "+srv.URL+"}}]\n"+
				"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
			args := []string{"migrate-storage", "--kubeconfig", kubeconfig, "--resources", "volumesnapshots,volumegroupsnapshots"}
			if dryRun {
				args = append(args, "--dry-run")
			}
			var out, errOut bytes.Buffer
			code := run("snapctl", args, &out, &errOut)
			srv.Close() // waits for the handlers: what they recorded is read after
			if code != 0 || errOut.String() != "" {
				t.Fatalf("exit %d, stderr %q\n%s", code, errOut.String(), out.String())
			}
			put := "PUT /apis/groupsnapshot.storage.k8s.io/v1beta2/namespaces/ns/volumegroupsnapshots/g?fieldManager=snapctl-migrate-storage"
			want := []string{
				"GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/volumesnapshots.snapshot.storage.k8s.io?",
				"GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/volumegroupsnapshots.groupsnapshot.storage.k8s.io?",
				"GET /apis/groupsnapshot.storage.k8s.io/v1beta2/volumegroupsnapshots?limit=500",
			}
			if dryRun {
				want = append(want, strings.Replace(put, "?", "?dryRun=All&", 1))
			} else {
				want = append(want, put,
					"GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/volumegroupsnapshots.groupsnapshot.storage.k8s.io?",
					"PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/volumegroupsnapshots.groupsnapshot.storage.k8s.io/status?fieldManager=snapctl-migrate-storage")
			}
			if !slices.Equal(api.requests, want) {
				t.Errorf("requests\n%s\nwant\n%s", strings.Join(api.requests, "\n"), strings.Join(want, "\n"))
			}
			if md, _ := api.put["metadata"].(map[string]any); api.put["apiVersion"] != "groupsnapshot.storage.k8s.io/v1beta2" || md["resourceVersion"] != "7" {
				t.Errorf("PUT body %v", api.put)
			}
			wantPatch := `application/merge-patch+json {"metadata":{"resourceVersion":"42"},"status":{"storedVersions":["v1beta2"]}}`
			if dryRun {
				wantPatch = ""
			}
			if api.patch != wantPatch {
				t.Errorf("patch %q, want %q", api.patch, wantPatch)
			}
			result := resultTrimmed
			if dryRun {
				result = resultWouldTrim
			}
			wantRow(t, out.String(), grVolumeGroupSnapshots, "v1beta2", 1, 1, 0, 0, 0, "v1beta1,v1beta2->v1beta2", result)
			wantRow(t, out.String(), grVolumeSnapshots, "-", 0, 0, 0, 0, 0, "-", resultNotInstalled)
		})
	}
}
