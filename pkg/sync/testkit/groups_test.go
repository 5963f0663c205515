package testkit

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// An option of a rule both kinds have says the same of either kind: a table
// case run for both relies on it.
func TestOptionsSayTheSameOfBothKinds(t *testing.T) {
	vs := Snapshot("s1", FromContent("pre"), BoundTo("pre"), ClassName("gold"))
	g := GroupSnapshot("s1", FromContent("pre"), BoundTo("pre"), ClassName("gold"))
	if ptr.Deref(vs.Spec.Source.VolumeSnapshotContentName, "") != "pre" || ptr.Deref(g.Spec.Source.VolumeGroupSnapshotContentName, "") != "pre" ||
		g.Spec.Source.Selector != nil || vs.Spec.Source.PersistentVolumeClaimName != nil {
		t.Errorf("FromContent: sources %+v and %+v", vs.Spec.Source, g.Spec.Source)
	}
	if *vs.Status.BoundVolumeSnapshotContentName != "pre" || *g.Status.BoundVolumeGroupSnapshotContentName != "pre" ||
		*vs.Spec.VolumeSnapshotClassName != "gold" || *g.Spec.VolumeGroupSnapshotClassName != "gold" {
		t.Errorf("BoundTo, ClassName: %+v %+v, %+v %+v", vs.Status, vs.Spec, g.Status, g.Spec)
	}
	if sel := GroupSnapshot("g").Spec.Source.Selector; sel == nil || sel.MatchLabels[GroupLabel] != GroupLabelValue {
		t.Errorf("default selector %v", sel)
	}

	opts := []interface {
		ContentOption
		GroupContentOption
	}{RefTo("ns", "s1", "uid-s1"), Retain(), PreProvisioned("h1", "m1"), Ready("h1"), Driver("d"), Finalizers()}
	c := Content("c1", As[ContentOption](opts)...)
	gc := GroupContent("c1", As[GroupContentOption](opts)...)
	if c.Spec.VolumeSnapshotRef.UID != "uid-s1" || gc.Spec.VolumeGroupSnapshotRef.UID != "uid-s1" ||
		gc.Spec.VolumeGroupSnapshotRef.Kind != snapshot.KindGroupSnapshot {
		t.Errorf("RefTo: %+v, %+v", c.Spec.VolumeSnapshotRef, gc.Spec.VolumeGroupSnapshotRef)
	}
	if c.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain || gc.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain ||
		c.Spec.Driver != "d" || gc.Spec.Driver != "d" || len(c.Finalizers)+len(gc.Finalizers) != 0 {
		t.Errorf("Retain, Driver, Finalizers: %+v, %+v", c, gc)
	}
	if h := gc.Spec.Source.GroupSnapshotHandles; *c.Spec.Source.SnapshotHandle != "h1" || h == nil || h.VolumeGroupSnapshotHandle != "h1" ||
		len(h.VolumeSnapshotHandles) != 1 || len(gc.Spec.Source.VolumeHandles) != 0 {
		t.Errorf("PreProvisioned: %+v, %+v", c.Spec.Source, gc.Spec.Source)
	}
	if !*c.Status.ReadyToUse || *c.Status.SnapshotHandle != "h1" || !*gc.Status.ReadyToUse || *gc.Status.VolumeGroupSnapshotHandle != "h1" {
		t.Errorf("Ready: %+v, %+v", c.Status, gc.Status)
	}

	class, groupClass := SnapshotClass("a", DefaultClass(), Retain(), Params{"k": "v"}), GroupClass("a", DefaultClass(), Retain(), Params{"k": "v"})
	if class.Annotations[snapshot.AnnDefaultClass] != "true" || groupClass.Annotations[snapshot.AnnGroupDefaultClass] != "true" ||
		class.DeletionPolicy != snapv1.VolumeSnapshotContentRetain || groupClass.DeletionPolicy != snapv1.VolumeSnapshotContentRetain ||
		class.Parameters["k"] != "v" || groupClass.Parameters["k"] != "v" {
		t.Errorf("DefaultClass, Retain, Params: %+v, %+v", class, groupClass)
	}
}

// The fake API server holds the group kinds as the others.
func TestAPIHoldsGroups(t *testing.T) {
	api := NewAPI(t, GroupSnapshot("g1"), GroupContent("gc1"), GroupClass("gold"))
	if api.GroupSnapshot(Namespace, "g1") == nil || api.GroupContent("gc1") == nil || len(api.GroupContents()) != 1 {
		t.Fatal("the group objects are not held")
	}
	if api.GroupSnapshot(Namespace, "none") != nil || api.GroupContent("none") != nil {
		t.Error("a group object that was never created is found")
	}
}
