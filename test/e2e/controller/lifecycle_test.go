package controller

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestDynamicSnapshotBecomesReadyAndIsDeleted(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{DefaultClass: true})
	ctx := context.Background()
	s.PVC(t, "data")
	vs := s.Snapshot(t, "snap", "data", nil)
	got := s.WaitReady(t, "snap", 30*time.Second)
	contentName := snapshot.ContentNameFor(vs.UID)
	switch {
	case got.Spec.VolumeSnapshotClassName == nil || *got.Spec.VolumeSnapshotClassName != s.Class:
		t.Errorf("default class not recorded: %v", got.Spec.VolumeSnapshotClassName)
	case *got.Status.BoundVolumeSnapshotContentName != contentName:
		t.Errorf("bound to %q, want %q", *got.Status.BoundVolumeSnapshotContentName, contentName)
	case got.Status.CreationTime == nil:
		t.Error("no creationTime")
	}
	// The CSI side removes its being-created mark right after it records
	// the answer, and the binder mirrors the content's status without
	// waiting for that write: the snapshot may show ready a moment before
	// it lands, so the mark is waited for, not read once.
	framework.Eventually(t, 10*time.Second, "content's being-created mark removed", func() (bool, error) {
		content, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, contentName, metav1.GetOptions{})
		return err == nil && !snapshot.HasAnnotation(content, snapshot.AnnBeingCreated, snapshot.ValueYes), err
	})
	// The claim is released once the cut is done.
	framework.Eventually(t, 10*time.Second, "claim finalizer released", func() (bool, error) {
		pvc, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && !snapshot.HasFinalizer(pvc, snapshot.FinalizerPVCAsSource), err
	})
	s.BackendMatchesContents(t)

	s.DeleteAndExpectNothingLeft(t, "snap", contentName)
	// Nothing is remembered of our writes once the caches caught up.
	for _, component := range []string{"binder", "csi"} {
		label := `component="` + component + `"`
		framework.Eventually(t, 10*time.Second, "snapkeeper_cache_lag_entries{"+label+"} 0", func() (bool, error) {
			v, found, err := s.Ctrl.MetricSeries(ctx, "snapkeeper_cache_lag_entries", label)
			return err == nil && found && v == 0, err
		})
	}
}

func TestRetainKeepsContentAndBackendSnapshot(t *testing.T) {
	s := newWorld(t, framework.ScenarioOptions{Policy: snapv1.VolumeSnapshotContentRetain})
	ctx := context.Background()
	s.PVC(t, "data")
	vs := s.Snapshot(t, "snap", "data", &s.Class)
	s.WaitReady(t, "snap", 30*time.Second)
	s.DeleteSnapshot(t, "snap")
	s.WaitSnapshotGone(t, "snap")
	content, err := s.Env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, snapshot.ContentNameFor(vs.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Retain content gone: %v", err)
	}
	if !snapshot.HasAnnotation(content, snapshot.AnnBeingDeleted, snapshot.ValueYes) {
		t.Error("Retain content lacks the being-deleted mark")
	}
	if backend := s.Drv.Created(t); len(backend) != 1 {
		t.Fatalf("backend holds %d snapshots, want the retained one", len(backend))
	}
	s.BackendMatchesContents(t)
}
