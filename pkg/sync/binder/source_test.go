package binder

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// A claim bound a moment before its snapshot may still look Pending (or be
// missing) in the binder's cache. With Config.Kube the binder reads it from
// the API server before reporting: no Warning, no status error, the content
// is made at once. Without it the cache's word is reported, as before.
func TestLaggingClaimCacheIsCheckedAgainstTheAPIServer(t *testing.T) {
	pvc, pv := testkit.BoundClaim("pvc1")
	unbound := pvc.DeepCopy()
	unbound.Status.Phase = corev1.ClaimPending
	unbound.Spec.VolumeName = ""
	cases := map[string]func(h *harness){
		"claim cached Pending": func(h *harness) {
			if err := h.kubeInf.Core().V1().PersistentVolumeClaims().Informer().GetStore().Update(unbound); err != nil {
				t.Fatal(err)
			}
		},
		"claim not cached yet": func(h *harness) {
			if err := h.kubeInf.Core().V1().PersistentVolumeClaims().Informer().GetStore().Delete(pvc); err != nil {
				t.Fatal(err)
			}
		},
		"volume not cached yet": func(h *harness) {
			if err := h.kubeInf.Core().V1().PersistentVolumes().Informer().GetStore().Delete(pv); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, lag := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []runtime.Object{testkit.Snapshot("s1"), pvc, pv, testkit.SnapshotClass("gold", testkit.DefaultClass())}
			h := newHarness(t, objs...)
			h.c.cfg.Kube = h.api.Kube
			lag(h)
			if _, err := h.syncSnapshot("s1"); err != nil {
				t.Fatal(err)
			}
			want := []string{"patch volumesnapshots", "create volumesnapshotcontents", "update persistentvolumeclaims"}
			if got := h.writes(); !slices.Equal(got, want) {
				t.Fatalf("writes = %v, want %v", got, want)
			}
			if ev := h.events(); len(ev) != 0 {
				t.Errorf("events = %v, want none", ev)
			}
		})
	}
	t.Run("without a client the cache is reported", func(t *testing.T) {
		h := newHarness(t, testkit.Snapshot("s1"), pvc, pv, testkit.SnapshotClass("gold", testkit.DefaultClass()))
		if err := h.kubeInf.Core().V1().PersistentVolumeClaims().Informer().GetStore().Update(unbound); err != nil {
			t.Fatal(err)
		}
		if _, err := h.syncSnapshot("s1"); err != nil {
			t.Fatal(err)
		}
		if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], snapshot.ReasonSnapshotContentCreationFailed) {
			t.Errorf("events = %v, want one %s", ev, snapshot.ReasonSnapshotContentCreationFailed)
		}
	})
}
