package doctor

import (
	"strings"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

const (
	ns  = "team"
	drv = "hostpath.csi.k8s.io"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func vs(name string, mods ...func(*snapv1.VolumeSnapshot)) snapv1.VolumeSnapshot {
	v := snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("data")}}}
	for _, m := range mods {
		m(&v)
	}
	return v
}

func class(name string) func(*snapv1.VolumeSnapshot) {
	return func(v *snapv1.VolumeSnapshot) { v.Spec.VolumeSnapshotClassName = ptr.To(name) }
}

func fromContent(name string) func(*snapv1.VolumeSnapshot) {
	return func(v *snapv1.VolumeSnapshot) {
		v.Spec.Source = snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: ptr.To(name)}
	}
}

func deletingVS(fins ...string) func(*snapv1.VolumeSnapshot) {
	return func(v *snapv1.VolumeSnapshot) {
		v.DeletionTimestamp = &metav1.Time{Time: now}
		v.Finalizers = fins
	}
}

func content(name, vsName string, mods ...func(*snapv1.VolumeSnapshotContent)) snapv1.VolumeSnapshotContent {
	c := snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapv1.VolumeSnapshotContentSpec{Driver: drv, DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: ns, Name: vsName, UID: types.UID("uid-" + vsName)}}}
	for _, m := range mods {
		m(&c)
	}
	return c
}

func snapClass(name string, isDefault bool) snapv1.VolumeSnapshotClass {
	c := snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: drv, DeletionPolicy: snapv1.VolumeSnapshotContentDelete}
	if isDefault {
		c.Annotations = map[string]string{snapshot.AnnDefaultClass: "true"}
	}
	return c
}

func claim(name string, bound bool) corev1.PersistentVolumeClaim {
	c := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if bound {
		c.Spec.VolumeName = "pv-" + name
		c.Status.Phase = corev1.ClaimBound
	}
	return c
}

// restoringClaim is an unbound claim restoring from the VolumeSnapshot
// named snap: what keeps a snapshot's deletion waiting.
func restoringClaim(name, snap string) corev1.PersistentVolumeClaim {
	c := claim(name, false)
	c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapshot.GroupName), Kind: snapshot.KindSnapshot, Name: snap}
	return c
}

func volume(name string, csi bool) corev1.PersistentVolume {
	v := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if csi {
		v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: drv, VolumeHandle: "h"}
	} else {
		v.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/x"}
	}
	return v
}

func freshLease() coordinationv1.Lease {
	t := metav1.NewMicroTime(now.Add(-time.Second))
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: snapshot.CSILeaseName(drv), Namespace: "kube-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x"), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &t}}
}

// served is the base world: a bound CSI claim, a default class, a fresh
// CSI side Lease.
func served() Input {
	return Input{Now: now, LeasesKnown: true, Leases: []coordinationv1.Lease{freshLease()},
		PVCs: []corev1.PersistentVolumeClaim{claim("data", true)}, PVs: []corev1.PersistentVolume{volume("pv-data", true)},
		Classes: []snapv1.VolumeSnapshotClass{snapClass("gold", true)}}
}

var analyzeCases = []struct {
	name   string
	in     func(in *Input)
	want   []string // "Kind name code" of each finding, in order
	reason string   // a substring of the first finding's reason
}{
	{name: "ready snapshot", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", func(v *snapv1.VolumeSnapshot) { v.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)} })}
	}},
	{name: "no CSI side", in: func(in *Input) {
		in.Leases = nil
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s")}
		in.Contents = []snapv1.VolumeSnapshotContent{content(snapshot.ContentNameFor("uid-s"), "s")}
	}, want: []string{"VolumeSnapshot s no-csi-side"}, reason: "no CSI side"},
	{name: "leases unknown: nothing said about CSI sides", in: func(in *Input) {
		in.Leases, in.LeasesKnown = nil, false
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s")}
		in.Contents = []snapv1.VolumeSnapshotContent{content(snapshot.ContentNameFor("uid-s"), "s")}
	}, want: []string{"VolumeSnapshot s waiting"}},
	{name: "no default class", in: func(in *Input) {
		in.Classes = []snapv1.VolumeSnapshotClass{snapClass("gold", false)}
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s")}
	}, want: []string{"VolumeSnapshot s no-default-class"}, reason: drv},
	{name: "two default classes", in: func(in *Input) {
		in.Classes = append(in.Classes, snapClass("silver", true))
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s")}
	}, want: []string{"VolumeSnapshot s two-default-classes"}, reason: "gold, silver"},
	{name: "class not found", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("nope"))}
	}, want: []string{"VolumeSnapshot s class-not-found"}, reason: `"nope"`},
	{name: "claim missing", in: func(in *Input) {
		in.PVCs = nil
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"))}
	}, want: []string{"VolumeSnapshot s pvc-missing"}},
	{name: "claim unbound", in: func(in *Input) {
		in.PVCs = []corev1.PersistentVolumeClaim{claim("data", false)}
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"))}
	}, want: []string{"VolumeSnapshot s pvc-unbound"}, reason: "Pending"},
	{name: "volume not CSI", in: func(in *Input) {
		in.PVs = []corev1.PersistentVolume{volume("pv-data", false)}
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"))}
	}, want: []string{"VolumeSnapshot s volume-not-csi"}},
	{name: "content misbound", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", fromContent("c"))}
		in.Contents = []snapv1.VolumeSnapshotContent{content("c", "other")}
	}, want: []string{"VolumeSnapshot s content-misbound"}, reason: "team/other"},
	{name: "pre-provisioned content missing", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", fromContent("c"))}
	}, want: []string{"VolumeSnapshot s content-missing"}},
	{name: "deletion held by a restoring claim", in: func(in *Input) {
		in.PVCs = append(in.PVCs, restoringClaim("restore", "s"))
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"), deletingVS(snapshot.FinalizerSnapshotAsSource))}
	}, want: []string{"VolumeSnapshot s deletion-held"}, reason: "claim restore"},
	{name: "deletion held only by the provisioner's finalizer", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"), deletingVS(snapshot.FinalizerProvisionerSource))}
	}, want: []string{"VolumeSnapshot s deletion-held"}, reason: "no claim restores from it"},
	{name: "deletion held by the provisioner for a restoring claim", in: func(in *Input) {
		in.PVCs = append(in.PVCs, restoringClaim("restore", "s"))
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"), deletingVS(snapshot.FinalizerProvisionerSource))}
	}, want: []string{"VolumeSnapshot s deletion-held"}, reason: "claim restore"},
	{name: "deletion held by another component", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"), deletingVS("backup.example.com/keep"))}
	}, want: []string{"VolumeSnapshot s deletion-held"}, reason: "backup.example.com/keep"},
	{name: "deleting content without CSI side", in: func(in *Input) {
		in.Leases = nil
		in.Contents = []snapv1.VolumeSnapshotContent{content("c", "gone", func(c *snapv1.VolumeSnapshotContent) {
			c.DeletionTimestamp = &metav1.Time{Time: now}
			c.Finalizers = []string{snapshot.FinalizerContentBound}
		})}
	}, want: []string{"VolumeSnapshotContent c no-csi-side"}, reason: "to delete"},
	{name: "deleting content held by its finalizer", in: func(in *Input) {
		in.Contents = []snapv1.VolumeSnapshotContent{content("c", "gone", func(c *snapv1.VolumeSnapshotContent) {
			c.DeletionTimestamp = &metav1.Time{Time: now}
			c.Finalizers = []string{snapshot.FinalizerContentBound}
		})}
	}, want: []string{"VolumeSnapshotContent c deletion-held"}, reason: snapshot.FinalizerContentBound},
	{name: "missing secret", in: func(in *Input) {
		in.Secrets = map[string]bool{"sec/creds": false}
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"))}
		in.Contents = []snapv1.VolumeSnapshotContent{content(snapshot.ContentNameFor("uid-s"), "s", func(c *snapv1.VolumeSnapshotContent) {
			c.Annotations = map[string]string{snapshot.AnnDeletionSecretName: "creds", snapshot.AnnDeletionSecretNamespace: "sec"}
		})}
	}, want: []string{"VolumeSnapshot s secret-missing"}, reason: "sec/creds"},
	{name: "driver error", in: func(in *Input) {
		in.Snapshots = []snapv1.VolumeSnapshot{vs("s", class("gold"))}
		in.Contents = []snapv1.VolumeSnapshotContent{content(snapshot.ContentNameFor("uid-s"), "s", func(c *snapv1.VolumeSnapshotContent) {
			c.Status = &snapv1.VolumeSnapshotContentStatus{Error: &snapv1.VolumeSnapshotError{Message: ptr.To("quota exceeded")}}
		})}
	}, want: []string{"VolumeSnapshot s driver-error"}, reason: "quota exceeded"},
	{name: "group without CSI side and a group of a missing class", in: func(in *Input) {
		in.Leases = nil
		g := groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: ns, UID: "uid-g"}}
		g2 := groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: ns},
			Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: ptr.To("nope")}}
		in.Groups = []groupv1.VolumeGroupSnapshot{g, g2}
		in.GroupContents = []groupv1.VolumeGroupSnapshotContent{{ObjectMeta: metav1.ObjectMeta{Name: snapshot.GroupContentNameFor("uid-g")},
			Spec: groupv1.VolumeGroupSnapshotContentSpec{Driver: drv}}}
	}, want: []string{"VolumeGroupSnapshot g no-csi-side", "VolumeGroupSnapshot h group-class-not-found"}},
	{name: "group no binder acted on", in: func(in *Input) {
		in.Now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		old := metav1.NewTime(in.Now.Add(-10 * time.Minute))
		fresh := metav1.NewTime(in.Now.Add(-5 * time.Second))
		in.Groups = []groupv1.VolumeGroupSnapshot{
			{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: ns, UID: "uid-idle", CreationTimestamp: old}},
			{ObjectMeta: metav1.ObjectMeta{Name: "just-made", Namespace: ns, UID: "uid-just", CreationTimestamp: fresh}},
		}
	}, want: []string{"VolumeGroupSnapshot idle groups-not-served", "VolumeGroupSnapshot just-made waiting"}, reason: "no binder has acted on it in 10m0s"},
}

func TestAnalyze(t *testing.T) {
	for _, tc := range analyzeCases {
		t.Run(tc.name, func(t *testing.T) {
			in := served()
			tc.in(&in)
			got := Analyze(in)
			var short []string
			for _, f := range got {
				short = append(short, f.Kind+" "+f.Name+" "+f.Code)
				if f.Reason == "" || f.Fix == "" {
					t.Errorf("finding without reason or fix: %+v", f)
				}
			}
			if strings.Join(short, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("findings = %q, want %q\n%v", short, tc.want, got)
			}
			if tc.reason != "" && !strings.Contains(got[0].Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", got[0].Reason, tc.reason)
			}
		})
	}
}

func TestFilterAndLine(t *testing.T) {
	fs := []Finding{{Kind: kindSnapshot, Namespace: ns, Name: "s", Code: PVCMissing, Reason: "r", Fix: "f"},
		{Kind: kindContent, Name: "c", scope: ns, Code: DeletionHeld, Reason: "r", Fix: "f"},
		{Kind: kindSnapshot, Namespace: "other", Name: "s", Code: PVCMissing, Reason: "r", Fix: "f"}}
	if got := Filter(fs, ns, ""); len(got) != 2 {
		t.Errorf("Filter(ns) = %v", got)
	}
	if got := Filter(fs, "", "s"); len(got) != 2 {
		t.Errorf("Filter(name) = %v", got)
	}
	if got, want := fs[0].String(), "VolumeSnapshot team/s [pvc-missing] r; fix: f"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
}
