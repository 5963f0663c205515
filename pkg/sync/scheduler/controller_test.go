package scheduler

import (
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

func TestRestoreSourceIndex(t *testing.T) {
	snapRef := func(name string) *corev1.TypedLocalObjectReference {
		return &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: name}
	}
	for name, tc := range map[string]struct {
		pvc  corev1.PersistentVolumeClaim
		want []string
	}{
		"a pending claim restoring through dataSource holds its snapshot": {
			pvc:  claim(corev1.ClaimPending, snapRef("s1"), nil),
			want: []string{"ns/s1"},
		},
		"through dataSourceRef in another namespace, that namespace's snapshot": {
			pvc: claim(corev1.ClaimPending, nil, &corev1.TypedObjectReference{
				APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: "s2", Namespace: ptr.To("other")}),
			want: []string{"other/s2"},
		},
		"a bound claim has copied its data: it holds nothing": {
			pvc: claim(corev1.ClaimBound, snapRef("s1"), nil),
		},
		"a claim cloned from a claim holds no snapshot": {
			pvc: claim(corev1.ClaimPending, &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}, nil),
		},
		"a VolumeSnapshot kind of another group is not ours": {
			pvc: claim(corev1.ClaimPending, &corev1.TypedLocalObjectReference{APIGroup: ptr.To("example.com"), Kind: "VolumeSnapshot", Name: "s1"}, nil),
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, _ := restoreSourceIndex(&tc.pvc)
			if !slices.Equal(got, tc.want) {
				t.Errorf("index %v, want %v", got, tc.want)
			}
		})
	}
}

func claim(phase corev1.PersistentVolumeClaimPhase, ds *corev1.TypedLocalObjectReference, ref *corev1.TypedObjectReference) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: "ns"},
		Spec:       corev1.PersistentVolumeClaimSpec{DataSource: ds, DataSourceRef: ref},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

// The component's cache keeps what retention and runs read, and nothing
// else: status fields beyond readiness, the spec's class and other
// annotations go.
func TestTrimSnapshotKeepsWhatRetentionReads(t *testing.T) {
	now := metav1.Now()
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: "s", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels:        map[string]string{schedule.LabelSchedule: "hourly", "team": "a"},
			Annotations:   map[string]string{schedule.AnnScheduledTime: "2026-12-06T08:00:00Z", "other": strings.Repeat("x", 1000)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			Finalizers:    []string{"f"},
		},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("data")}, VolumeSnapshotClassName: ptr.To("c")},
		Status: &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(false), Error: &snapv1.VolumeSnapshotError{Message: ptr.To("boom")},
			CreationTime: &now, BoundVolumeSnapshotContentName: ptr.To("content")},
	}
	out, err := trimSnapshot(vs)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*snapv1.VolumeSnapshot)
	items := schedule.SnapshotItems([]*snapv1.VolumeSnapshot{got}, nil)
	want := schedule.SnapshotItems([]*snapv1.VolumeSnapshot{vs}, nil)
	if !slices.Equal(items, want) {
		t.Errorf("retention reads %+v of the trimmed copy, %+v of the object", items, want)
	}
	if got.ManagedFields != nil || got.Finalizers != nil || got.Annotations["other"] != "" || got.Spec.VolumeSnapshotClassName != nil ||
		got.Status.BoundVolumeSnapshotContentName != nil {
		t.Errorf("trimmed copy keeps more than it needs: %+v", got)
	}
	if got.UID != "u" || got.ResourceVersion != "7" || got.Labels[schedule.LabelSchedule] != "hourly" || *got.Spec.Source.PersistentVolumeClaimName != "data" {
		t.Errorf("trimmed copy lost identity, label or claim: %+v", got)
	}
}

func TestRunOutcome(t *testing.T) {
	for name, tc := range map[string]struct {
		out    runOutcome
		result string
		text   []string
	}{
		"every claim cut":        {out: runOutcome{cut: 3}, result: "cut", text: []string{"nothing"}},
		"no claim selected":      {out: runOutcome{noClaims: true}, result: "no_claims"},
		"a claim behind":         {out: runOutcome{cut: 2, behind: []string{"db-0"}}, result: "partial", text: []string{"1 claim(s) whose last two snapshots are not ready yet ([db-0])"}},
		"claims behind, unbound": {out: runOutcome{behind: []string{"a"}, unbound: []string{"b", "c"}}, result: "partial", text: []string{"1 claim(s)", " and 2 claim(s) not bound to a volume yet ([b c])"}},
		"many names are cut short": {out: runOutcome{unbound: []string{"a", "b", "c", "d", "e", "f", "g"}}, result: "partial",
			text: []string{"[a b c d e] and 2 more"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.out.result(); got != tc.result {
				t.Errorf("result %q, want %q", got, tc.result)
			}
			for _, part := range tc.text {
				if got := tc.out.skippedText(); !strings.Contains(got, part) {
					t.Errorf("skipped %q lacks %q", got, part)
				}
			}
		})
	}
}
