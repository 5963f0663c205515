package main

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The cost of volume group snapshots: G groups of K bound claims each,
// created at once and deleted at once, on a fresh control plane per system,
// every binder and CSI side with the CSIVolumeGroupSnapshot gate on. What is
// counted is what the API server counts (writes by resource) and the events
// left behind, per group and per member.

const (
	groupGate      = "--feature-gates=CSIVolumeGroupSnapshot=true"
	groupClassName = "bench-group-class"
	groupDefaultAn = "groupsnapshot.storage.kubernetes.io/is-default-class"
	groupLabel     = "bench-group"
)

type groupOptions struct {
	groups, size, conc      int
	ceilingOps, ceilingConc int // 0 ops: no write ceiling, no floor
	quiet                   time.Duration
	keep                    bool
}

// groupResult is the group scenario of one system.
type groupResult struct {
	System         *system
	Groups, Size   int
	Ceiling        ceilings // writes/s on this control plane, before the claims
	Create, Delete phase
	Err            error
}

func groupName(g int) string        { return fmt.Sprintf("group-%03d", g) }
func groupClaim(g, m int) string    { return fmt.Sprintf("g%03d-pvc-%02d", g, m) }
func (r *groupResult) members() int { return r.Groups * r.Size }

func runGroups(ctx context.Context, sys *system, o groupOptions) *groupResult {
	res := &groupResult{System: sys, Groups: o.groups, Size: o.size}
	res.Err = groupScenario(ctx, sys, o, res)
	return res
}

func groupScenario(ctx context.Context, sys *system, o groupOptions, res *groupResult) (err error) {
	b, err := newBed(ctx, "groups "+sys.ID, "groups-"+sys.ID, o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	env, cl := b.env, b.cl
	if o.ceilingOps > 0 {
		if res.Ceiling, err = b.ceilings(ctx, o.ceilingOps, o.ceilingConc); err != nil {
			return err
		}
	}
	logf("[groups %s] binding %d labelled PVCs (%d groups of %d)", sys.ID, o.groups*o.size, o.groups, o.size)
	if err := prepareGroups(ctx, env, o.groups, o.size); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := b.startDriver(driverOptions(false, "")); err != nil {
		return err
	}
	if _, err := b.startSystem(sys, startOpts{extra: []string{groupGate}}); err != nil {
		return err
	}
	timeout := 2*time.Minute + time.Duration(o.groups*o.size)*sys.perSnapshotBudget

	mark, err := b.mark(ctx, o.quiet)
	if err != nil {
		return err
	}
	logf("[groups %s] creating %d VolumeGroupSnapshots (timeout %s)", sys.ID, o.groups, timeout)
	res.Create.Load = loadAvg()
	start := time.Now()
	if err := parallel(ctx, o.groups, o.conc, func(ctx context.Context, g int) error {
		_, err := cl.snap.GroupsnapshotV1().VolumeGroupSnapshots(benchNamespace).Create(ctx, &groupv1.VolumeGroupSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: groupName(g), Namespace: benchNamespace},
			Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: groupName(g)}},
			}},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create groups: %w", err)
	}
	res.Create.Issued = time.Since(start)
	var last string
	err = pollUntil(ctx, timeout, b.exited, func() (bool, error) {
		ready, err := readyGroups(ctx, env)
		last = fmt.Sprintf("%d of %d groups ready", ready, o.groups)
		if err != nil || ready < o.groups {
			return false, err
		}
		members, err := readyMembers(ctx, env)
		last += fmt.Sprintf(", %d of %d members", members, o.groups*o.size)
		return members == o.groups*o.size, err
	})
	res.Create.Duration = time.Since(start)
	if err != nil {
		if lastGroupError != nil {
			last += " (" + lastGroupError.Error() + ")"
		}
		return fmt.Errorf("%s: %w", last, err)
	}
	logf("[groups %s] all %d groups ready in %s; waiting for writes to stop", sys.ID, o.groups, res.Create.Duration.Round(time.Millisecond))
	if mark, err = mark.close(ctx, &res.Create, timeout); err != nil {
		return err
	}
	if res.Create.Events, err = eventsByReason(ctx, env); err != nil {
		return err
	}

	logf("[groups %s] deleting %d VolumeGroupSnapshots", sys.ID, o.groups)
	res.Delete.Load = loadAvg()
	start = time.Now()
	if err := parallel(ctx, o.groups, o.conc, func(ctx context.Context, g int) error {
		err := cl.snap.GroupsnapshotV1().VolumeGroupSnapshots(benchNamespace).Delete(ctx, groupName(g), metav1.DeleteOptions{})
		if errors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("delete groups: %w", err)
	}
	res.Delete.Issued = time.Since(start)
	err = pollUntil(ctx, timeout, b.exited, func() (bool, error) {
		var gone bool
		gone, last, err = groupsGone(ctx, env, b.drv)
		return gone, err
	})
	res.Delete.Duration = time.Since(start)
	if err != nil {
		return fmt.Errorf("after deleting the groups %s: %w", last, err)
	}
	logf("[groups %s] all deleted in %s; waiting for writes to stop", sys.ID, res.Delete.Duration.Round(time.Millisecond))
	if _, err = mark.close(ctx, &res.Delete, timeout); err != nil {
		return err
	}
	events, err := eventsByReason(ctx, env)
	if err != nil {
		return err
	}
	res.Delete.Events = framework.DiffCounts(events, res.Create.Events)
	return b.exited()
}

// prepareGroups creates the namespace, the claims of every group (bound,
// labelled with their group) and the driver's default snapshot and group
// classes, outside any measured window.
func prepareGroups(ctx context.Context, env *framework.Env, groups, size int) error {
	if err := prepareClaims(ctx, env, groups*size, func(ctx context.Context, i int) error {
		g, m := i/size, i%size
		name := groupClaim(g, m)
		if _, err := env.BindPVC(ctx, benchNamespace, name, framework.PVCOptions{Driver: framework.MockDriverName}); err != nil {
			return err
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, groupLabel, groupName(g))
		_, err := env.Kube.CoreV1().PersistentVolumeClaims(benchNamespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}); err != nil {
		return err
	}
	_, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx, &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: groupClassName, Annotations: map[string]string{groupDefaultAn: "true"}},
		Driver:         framework.MockDriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}, metav1.CreateOptions{})
	return err
}

// lastGroupError is the first status error of a group that readyGroups
// saw in its last listing (the groups run one system at a time).
var lastGroupError error

// readyGroups counts the ready groups (by listing: reads are not what is
// measured, but the members are listed only once every group is ready:
// listing a thousand snapshots every 250 ms loads the API server under
// test).
func readyGroups(ctx context.Context, env *framework.Env) (int, error) {
	gl, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var ready int
	var status error // the first group error seen
	for _, g := range gl.Items {
		if g.Status != nil && g.Status.ReadyToUse != nil && *g.Status.ReadyToUse {
			ready++
		} else if g.Status != nil && g.Status.Error != nil && g.Status.Error.Message != nil && status == nil {
			status = fmt.Errorf("%s: %s", g.Name, *g.Status.Error.Message)
		}
	}
	lastGroupError = status
	return ready, nil
}

// readyMembers counts the ready member snapshots.
func readyMembers(ctx context.Context, env *framework.Env) (int, error) {
	sl, err := env.Snap.SnapshotV1().VolumeSnapshots(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var ready int
	for _, s := range sl.Items {
		if s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse {
			ready++
		}
	}
	return ready, nil
}

// groupsGone reports whether every group, group content, member snapshot
// and content, and every backend snapshot and group is gone, and what is
// left otherwise. The members are listed only once the groups and their
// contents are gone (see readyGroups).
func groupsGone(ctx context.Context, env *framework.Env, drv *framework.CSIDriver) (bool, string, error) {
	gl, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	gcl, err := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	if len(gl.Items)+len(gcl.Items) > 0 {
		return false, fmt.Sprintf("%d groups and %d group contents remain", len(gl.Items), len(gcl.Items)), nil
	}
	sl, err := env.Snap.SnapshotV1().VolumeSnapshots(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	cl, err := env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	snaps, err := drv.GetCreated(ctx)
	if err != nil {
		return false, "", err
	}
	groups, err := drv.GetGroups(ctx)
	if err != nil {
		return false, "", err
	}
	left := fmt.Sprintf("%d groups, %d group contents, %d snapshots, %d contents, %d backend snapshots and %d backend groups remain",
		len(gl.Items), len(gcl.Items), len(sl.Items), len(cl.Items), len(snaps), len(groups))
	return len(gl.Items)+len(gcl.Items)+len(sl.Items)+len(cl.Items)+len(snaps)+len(groups) == 0, left, nil
}

// pollUntil calls done every 250 ms until it reports true, the timeout
// passes or exited reports a process that ended.
func pollUntil(ctx context.Context, timeout time.Duration, exited func() error, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if err := exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
