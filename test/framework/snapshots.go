package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WaitSnapshotReady waits until VolumeSnapshot ns/name is readyToUse and
// returns it.
func (e *Env) WaitSnapshotReady(t T, ns, name string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	return waitObject(t, timeout, "snapshot "+name+" ready", e.snapshotGetter(ns, name),
		func(vs *snapv1.VolumeSnapshot) (bool, error) { return snapshotStatus(vs).ready() })
}

// WaitSnapshotError waits until the status.error of VolumeSnapshot ns/name
// contains substr and returns the snapshot.
func (e *Env) WaitSnapshotError(t T, ns, name, substr string, timeout time.Duration) *snapv1.VolumeSnapshot {
	t.Helper()
	return waitObject(t, timeout, "snapshot "+name+" error containing "+substr, e.snapshotGetter(ns, name),
		func(vs *snapv1.VolumeSnapshot) (bool, error) { return snapshotStatus(vs).errorContains(substr) })
}

// WaitContent polls VolumeSnapshotContent name until cond holds and returns
// it; what says what the test waits for.
func (e *Env) WaitContent(t T, name, what string, timeout time.Duration, cond func(*snapv1.VolumeSnapshotContent) bool) *snapv1.VolumeSnapshotContent {
	t.Helper()
	return waitObject(t, timeout, "content "+name+" "+what, e.contentGetter(name), func(c *snapv1.VolumeSnapshotContent) (bool, error) {
		return cond(c), fmt.Errorf("annotations %v finalizers %v status %s", c.Annotations, c.Finalizers, JSON(c.Status))
	})
}

// WaitGroupReady waits until VolumeGroupSnapshot ns/name is readyToUse and
// returns it.
func (e *Env) WaitGroupReady(t T, ns, name string, timeout time.Duration) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	return waitObject(t, timeout, "group "+name+" ready", e.groupGetter(ns, name),
		func(g *groupv1.VolumeGroupSnapshot) (bool, error) { return groupStatus(g).ready() })
}

// WaitGroupError waits until the status.error of VolumeGroupSnapshot
// ns/name contains substr and returns the group.
func (e *Env) WaitGroupError(t T, ns, name, substr string, timeout time.Duration) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	return waitObject(t, timeout, "group "+name+" error containing "+substr, e.groupGetter(ns, name),
		func(g *groupv1.VolumeGroupSnapshot) (bool, error) { return groupStatus(g).errorContains(substr) })
}

// WaitSnapshotGone waits until VolumeSnapshot ns/name no longer exists.
func (e *Env) WaitSnapshotGone(t T, ns, name string, timeout time.Duration) {
	t.Helper()
	waitNotFound(t, "snapshot "+name, timeout, e.snapshotGetter(ns, name))
}

// WaitContentGone waits until VolumeSnapshotContent name no longer exists.
func (e *Env) WaitContentGone(t T, name string, timeout time.Duration) {
	t.Helper()
	waitNotFound(t, "content "+name, timeout, e.contentGetter(name))
}

// WaitGroupGone waits until VolumeGroupSnapshot ns/name no longer exists.
func (e *Env) WaitGroupGone(t T, ns, name string, timeout time.Duration) {
	t.Helper()
	waitNotFound(t, "group "+name, timeout, e.groupGetter(ns, name))
}

// WaitGroupContentGone waits until VolumeGroupSnapshotContent name no
// longer exists.
func (e *Env) WaitGroupContentGone(t T, name string, timeout time.Duration) {
	t.Helper()
	waitNotFound(t, "group content "+name, timeout, func(ctx context.Context) (*groupv1.VolumeGroupSnapshotContent, error) {
		return e.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	})
}

func (e *Env) snapshotGetter(ns, name string) func(context.Context) (*snapv1.VolumeSnapshot, error) {
	return func(ctx context.Context) (*snapv1.VolumeSnapshot, error) {
		return e.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	}
}

func (e *Env) contentGetter(name string) func(context.Context) (*snapv1.VolumeSnapshotContent, error) {
	return func(ctx context.Context) (*snapv1.VolumeSnapshotContent, error) {
		return e.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	}
}

func (e *Env) groupGetter(ns, name string) func(context.Context) (*groupv1.VolumeGroupSnapshot, error) {
	return func(ctx context.Context) (*groupv1.VolumeGroupSnapshot, error) {
		return e.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	}
}

// waitObject polls get until done says so and returns the last object.
func waitObject[O any](t T, timeout time.Duration, what string, get func(context.Context) (O, error), done func(O) (bool, error)) O {
	t.Helper()
	var o O
	Eventually(t, timeout, what, func() (bool, error) {
		var err error
		if o, err = get(context.Background()); err != nil {
			return false, err
		}
		return done(o)
	})
	return o
}

func waitNotFound[O any](t T, what string, timeout time.Duration, get func(context.Context) (O, error)) {
	t.Helper()
	Eventually(t, timeout, what+" gone", func() (bool, error) {
		_, err := get(context.Background())
		return apierrors.IsNotFound(err), err
	})
}

// status is what the waits read of a snapshot's or a group's status.
type status struct {
	readyToUse *bool
	err        *snapv1.VolumeSnapshotError
	all        any // the whole status, for messages
}

func snapshotStatus(vs *snapv1.VolumeSnapshot) status {
	if vs.Status == nil {
		return status{}
	}
	return status{vs.Status.ReadyToUse, vs.Status.Error, vs.Status}
}

func groupStatus(g *groupv1.VolumeGroupSnapshot) status {
	if g.Status == nil {
		return status{}
	}
	return status{g.Status.ReadyToUse, g.Status.Error, g.Status}
}

func (s status) ready() (bool, error) {
	return s.readyToUse != nil && *s.readyToUse, fmt.Errorf("status %s", JSON(s.all))
}

func (s status) errorContains(substr string) (bool, error) {
	if s.err == nil || s.err.Message == nil {
		return false, fmt.Errorf("status %s", JSON(s.all))
	}
	return strings.Contains(*s.err.Message, substr), fmt.Errorf("error %q", *s.err.Message)
}

// JSON renders v for failure messages ("<nil>" for a nil pointer).
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}
