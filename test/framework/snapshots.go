package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WaitSnapshotReady waits until VolumeSnapshot ns/name is readyToUse and
// returns it.
func (e *Env) WaitSnapshotReady(t T, ns, name string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	var vs *snapv1.VolumeSnapshot
	Eventually(t, timeout, "snapshot "+name+" ready", func() (bool, error) {
		var err error
		vs, err = e.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse, fmt.Errorf("status %s", JSON(vs.Status))
	})
	return vs
}

// WaitSnapshotGone waits until VolumeSnapshot ns/name no longer exists.
func (e *Env) WaitSnapshotGone(t T, ns, name string, timeout time.Duration) {
	t.Helper()
	waitNotFound(t, "snapshot "+name, timeout, func() error {
		_, err := e.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err
	})
}

// WaitContentGone waits until VolumeSnapshotContent name no longer exists.
func (e *Env) WaitContentGone(t T, name string, timeout time.Duration) {
	t.Helper()
	waitNotFound(t, "content "+name, timeout, func() error {
		_, err := e.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), name, metav1.GetOptions{})
		return err
	})
}

func waitNotFound(t T, what string, timeout time.Duration, get func() error) {
	t.Helper()
	Eventually(t, timeout, what+" gone", func() (bool, error) {
		err := get()
		return apierrors.IsNotFound(err), err
	})
}

// JSON renders v for failure messages ("<nil>" for a nil pointer).
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}
