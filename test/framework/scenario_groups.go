package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// The group snapshot side of a Scenario: with ScenarioOptions.GroupClass
// the scenario has a default VolumeGroupSnapshotClass of its driver
// (Scenario.GroupClass), and these helpers create, wait for and delete
// groups, list their members, and check that nothing leaks.

// Group creates a dynamic VolumeGroupSnapshot of the claims sel matches,
// in the group class the default gives.
func (s *Scenario) Group(t T, name string, sel *metav1.LabelSelector) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	g := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec:       groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{Selector: sel}},
	}
	return MustCreate(t, s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(s.NS).Create, g)
}

// GetGroup reads VolumeGroupSnapshot name.
func (s *Scenario) GetGroup(t T, name string) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	return Must(t, func(ctx context.Context) (*groupv1.VolumeGroupSnapshot, error) {
		return s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(s.NS).Get(ctx, name, metav1.GetOptions{})
	})
}

// WaitGroupReady waits until group name is ready to use.
func (s *Scenario) WaitGroupReady(t T, name string, timeout time.Duration) *groupv1.VolumeGroupSnapshot {
	t.Helper()
	return s.Env.WaitGroupReady(t, s.NS, name, timeout)
}

// DeleteGroup deletes group name.
func (s *Scenario) DeleteGroup(t T, name string) {
	t.Helper()
	if err := s.Env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(s.NS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete group %s: %v", name, err)
	}
}

// WaitGroupGone waits until group name no longer exists.
func (s *Scenario) WaitGroupGone(t T, name string) {
	t.Helper()
	s.Env.WaitGroupGone(t, s.NS, name, 30*time.Second)
}

// Members lists the VolumeSnapshots group owns, by name.
func (s *Scenario) Members(t T, group string) []snapv1.VolumeSnapshot {
	t.Helper()
	list := Must(t, func(ctx context.Context) (*snapv1.VolumeSnapshotList, error) {
		return s.Env.Snap.SnapshotV1().VolumeSnapshots(s.NS).List(ctx, metav1.ListOptions{})
	})
	var out []snapv1.VolumeSnapshot
	for _, vs := range list.Items {
		if snapshot.GroupOwner(&vs) == group {
			out = append(out, vs)
		}
	}
	slices.SortFunc(out, func(a, b snapv1.VolumeSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NoLeak waits until the driver holds exactly the snapshots the contents
// point at and the groups the group contents point at.
func (s *Scenario) NoLeak(t T) {
	t.Helper()
	s.BackendMatchesContents(t)
	s.Env.WaitBackendGroupsMatchGroupContents(t, s.Drv)
}

// NothingLeft is NoLeak once every group is gone: the driver holds no
// group.
func (s *Scenario) NothingLeft(t T) {
	t.Helper()
	s.NoLeak(t)
	if b := s.Drv.Groups(t); len(b) != 0 {
		t.Fatalf("backend groups left: %s", JSON(b))
	}
}

// WaitBackendGroups waits until the driver holds n groups.
func (s *Scenario) WaitBackendGroups(t T, n int) {
	t.Helper()
	Eventually(t, 30*time.Second, fmt.Sprintf("%d backend groups", n), func() (bool, error) {
		b, err := s.Drv.GetGroups(context.Background())
		return len(b) == n, fmt.Errorf("%d groups (%v)", len(b), err)
	})
}

// Restart kills the scenario's controller with SIGKILL and starts a new
// one with the same arguments.
func (s *Scenario) Restart(t T) {
	t.Helper()
	s.Ctrl.Proc.Signal(syscall.SIGKILL)
	_ = s.Ctrl.Proc.Wait(context.Background())
	s.Ctrl = s.StartController(t, s.Args...)
}
