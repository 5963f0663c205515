package framework

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackendMatchesContents compares the snapshots the driver holds (without
// the mock's built-ins) with the handles of the driver's contents.
func (e *Env) BackendMatchesContents(ctx context.Context, drv *CSIDriver) (bool, error) {
	backend, err := drv.GetCreated(ctx)
	if err != nil {
		return false, err
	}
	list, err := e.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	have := collect(backend, func(b *BackendSnapshot) (string, bool) { return b.ID, true })
	want := collect(list.Items, func(c *snapv1.VolumeSnapshotContent) (string, bool) {
		switch {
		case c.Spec.Driver != drv.Name:
		case c.Status != nil && c.Status.SnapshotHandle != nil:
			return *c.Status.SnapshotHandle, true
		case c.Spec.Source.SnapshotHandle != nil:
			return *c.Spec.Source.SnapshotHandle, true
		}
		return "", false
	})
	return sameIDs(have, want, "backend %v, content handles %v")
}

// BackendGroupsMatchGroupContents compares the group snapshots the driver
// holds with the handles of the driver's group contents.
func (e *Env) BackendGroupsMatchGroupContents(ctx context.Context, drv *CSIDriver) (bool, error) {
	groups, err := drv.GetGroups(ctx)
	if err != nil {
		return false, err
	}
	list, err := e.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	have := collect(groups, func(g *BackendGroup) (string, bool) { return g.ID, true })
	want := collect(list.Items, func(c *groupv1.VolumeGroupSnapshotContent) (string, bool) {
		switch {
		case c.Spec.Driver != drv.Name:
		case c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil:
			return *c.Status.VolumeGroupSnapshotHandle, true
		case c.Spec.Source.GroupSnapshotHandles != nil:
			return c.Spec.Source.GroupSnapshotHandles.VolumeGroupSnapshotHandle, true
		}
		return "", false
	})
	return sameIDs(have, want, "backend groups %v, group content handles %v")
}

// collect returns what f picks of each item.
func collect[X any](items []X, f func(*X) (string, bool)) []string {
	var out []string
	for i := range items {
		if s, ok := f(&items[i]); ok {
			out = append(out, s)
		}
	}
	return out
}

func sameIDs(have, want []string, format string) (bool, error) {
	sort.Strings(have)
	sort.Strings(want)
	return slices.Equal(have, want), fmt.Errorf(format, have, want)
}

// BackendSettles waits up to timeout until the driver holds exactly the
// snapshots its contents point at (no leak, no duplicate), then checks that
// the equality still holds a second later (a late duplicate create would
// break it). It reports instead of failing the test.
func (e *Env) BackendSettles(drv *CSIDriver, timeout time.Duration) error {
	check := func() (bool, error) { return e.BackendMatchesContents(context.Background(), drv) }
	if err := Poll(timeout, "backend == content handles", check); err != nil {
		return err
	}
	time.Sleep(time.Second)
	if ok, err := check(); !ok {
		return fmt.Errorf("backend and contents diverged again: %v", err)
	}
	return nil
}

// WaitBackendMatchesContents asserts that the driver holds exactly the
// snapshots its contents point at: BackendSettles within 30 seconds.
func (e *Env) WaitBackendMatchesContents(t T, drv *CSIDriver) {
	t.Helper()
	if err := e.BackendSettles(drv, 30*time.Second); err != nil {
		t.Fatalf("%v", err)
	}
}

// WaitBackendGroupsMatchGroupContents waits until the driver holds exactly
// the group snapshots its group contents point at.
func (e *Env) WaitBackendGroupsMatchGroupContents(t T, drv *CSIDriver) {
	t.Helper()
	Eventually(t, 30*time.Second, "backend groups == group content handles", func() (bool, error) {
		return e.BackendGroupsMatchGroupContents(context.Background(), drv)
	})
}
