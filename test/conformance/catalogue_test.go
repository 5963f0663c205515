package conformance

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The catalogue. Every scenario runs against every pairing; Short ones also
// in the plain `go test` (make test), the rest with
// SNAPKEEPER_CONFORMANCE=full (make conformance).

// Reusable steps and actions.

// claimAndSnap creates a bound claim "data" and a snapshot "snap" of it
// with the scenario's class.
var claimAndSnap = seq(
	func(ctx context.Context, r *run) error { return r.pvc(ctx, "data", framework.PVCOptions{}) },
	func(ctx context.Context, r *run) error { return r.snapshot(ctx, "snap", "data", r.className()) },
)

// createDynamic: claimAndSnap, ready.
func createDynamic() step {
	return step{Name: "create", Do: claimAndSnap, Until: vsReady("snap")}
}

// deleting deletes snapshot name.
func deleting(name string) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error { return r.deleteSnapshot(ctx, name) }
}

// deleteSnap deletes snapshot name and waits until it is gone.
func deleteSnap(name string) step {
	return step{Name: "delete " + name, Do: deleting(name), Until: vsGone(name)}
}

// deleteSnapAll deletes snapshot name and waits until it and every content
// are gone (a Delete policy).
func deleteSnapAll(name string) step {
	return step{Name: "delete " + name, Do: deleting(name), Until: all(vsGone(name), contentsGone)}
}

// staticOnceSettled creates snapshot vs (of class, or none) naming the
// run's content "c" once the informer caches hold that content.
func (r *run) staticOnceSettled(ctx context.Context, vs, class string) error {
	if err := r.settleContent(ctx, r.contentName("c")); err != nil {
		return err
	}
	return r.staticSnapshot(ctx, vs, r.contentName("c"), class)
}

// restoreScenario: a claim restores (Pending) from a ready snapshot, the
// snapshot is deleted, then the restore finishes (claim deleted, or bound).
func restoreScenario(name, title string, policy snapv1.DeletionPolicy, ref, bind, short bool) *scenario {
	finish := step{Name: "restore ends: claim deleted", Do: func(ctx context.Context, r *run) error { return r.deletePVC(ctx, "restored") }}
	if bind {
		finish = step{Name: "restore ends: claim bound", Do: func(ctx context.Context, r *run) error { return r.bindPVC(ctx, "restored") }}
	}
	finish.Until = vsGone("snap")
	if policy == snapv1.VolumeSnapshotContentDelete {
		finish.Until = all(vsGone("snap"), contentsGone)
	}
	finish.Timeout = 90 * time.Second
	return &scenario{Name: name, Title: title, Short: short, Policy: policy, Steps: []step{
		createDynamic(),
		{Name: "restore from snap", Do: func(ctx context.Context, r *run) error { return r.restorePVC(ctx, "restored", "snap", ref) }},
		{Name: "delete snap", Do: deleting("snap"), Quiet: 5 * time.Second},
		finish,
	}}
}

// importScenario: an admin cuts a backend snapshot, imports it with a
// content pre-bound to snapshot "snap" (which names the class) and deletes
// the snapshot. With settle the snapshot is created once the content is in
// the caches; without, right after it.
func importScenario(name, title string, short, settle bool) *scenario {
	return &scenario{Name: name, Title: title, Short: short, Steps: []step{
		{Name: "cut and import", Do: func(ctx context.Context, r *run) error {
			id, err := r.cut(ctx, "imported", "vol-src")
			if err != nil {
				return err
			}
			if err := r.importContent(ctx, "c", id, "snap", "", "", snapv1.VolumeSnapshotContentDelete); err != nil {
				return err
			}
			if settle {
				return r.staticOnceSettled(ctx, "snap", r.className())
			}
			return r.staticSnapshot(ctx, "snap", r.contentName("c"), r.className())
		}, Until: vsReady("snap")},
		deleteSnapAll("snap"),
	}}
}

func catalogue() []*scenario {
	return append(singleScenarios(), groupScenarios()...)
}

// singleScenarios are the scenarios of single snapshots; groupScenarios
// (groups_test.go) those of volume group snapshots.
func singleScenarios() []*scenario {
	return []*scenario{
		{
			Name: "dyn-delete", Title: "dynamic snapshot: create, ready, delete (Delete policy)", Short: true,
			Steps: []step{createDynamic(), deleteSnapAll("snap")},
		},
		{
			Name: "dyn-retain", Title: "dynamic snapshot with Retain: delete the snapshot, then the content", Short: true,
			Policy: snapv1.VolumeSnapshotContentRetain,
			Steps: []step{createDynamic(), deleteSnap("snap"), {
				Name: "delete content",
				Do: func(ctx context.Context, r *run) error {
					for name := range r.seenContents {
						if err := r.deleteContent(ctx, name); err != nil {
							return err
						}
					}
					return nil
				},
				Until: contentsGone,
			}},
		},
		{
			Name: "default-class", Title: "dynamic snapshot without a class name: the driver's default class is used",
			NoClass: true,
			Steps: []step{
				{Name: "default class", Do: func(ctx context.Context, r *run) error {
					return r.class(ctx, r.className(), "", nil, true)
				}},
				{Name: "create", Do: seq(
					func(ctx context.Context, r *run) error { return r.pvc(ctx, "data", framework.PVCOptions{}) },
					func(ctx context.Context, r *run) error { return r.snapshot(ctx, "snap", "data", "") },
				), Until: vsReady("snap")},
				deleteSnapAll("snap"),
			},
		},
		importScenario("import", "pre-provisioned import of an existing backend snapshot, then delete (Delete policy)", true, true),
		importScenario("import-together", "pre-provisioned import with content and snapshot created back to back (one kubectl apply)", false, false),
		{
			Name: "import-unknown", Title: "pre-provisioned content whose handle the driver does not know",
			Steps: []step{
				{Name: "import", Do: func(ctx context.Context, r *run) error {
					if err := r.importContent(ctx, "c", "no-such-snapshot", "snap", "", "", snapv1.VolumeSnapshotContentDelete); err != nil {
						return err
					}
					return r.staticOnceSettled(ctx, "snap", r.className())
				}, Until: vsError("snap"), Timeout: 30 * time.Second},
				deleteSnapAll("snap"),
			},
		},
		{
			Name: "preprov-volume", Title: "pre-provisioned content without a snapshot handle (source.volumeHandle) named by a snapshot: refused",
			Steps: []step{
				{Name: "content and snapshot", Do: func(ctx context.Context, r *run) error {
					vol, class := "vol-data", r.className()
					c := &snapv1.VolumeSnapshotContent{
						ObjectMeta: metav1.ObjectMeta{Name: r.contentName("c")},
						Spec: snapv1.VolumeSnapshotContentSpec{
							VolumeSnapshotRef:       corev1Ref(r.ns, "snap"),
							DeletionPolicy:          snapv1.VolumeSnapshotContentDelete,
							Driver:                  r.driverName(),
							Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &vol},
							VolumeSnapshotClassName: &class,
						},
					}
					if err := r.createContent(ctx, c); err != nil {
						return err
					}
					return r.staticOnceSettled(ctx, "snap", "")
				}, Until: vsError("snap"), Timeout: 30 * time.Second},
				deleteSnap("snap"),
			},
		},
		{
			Name: "dyn-has-handle", Title: "dynamic content that already has a handle when the CSI side starts",
			CSI: csiLater,
			Steps: []step{
				{Name: "create without CSI side", Do: claimAndSnap, Until: contentOf("snap", func(*snapv1.VolumeSnapshotContent) bool { return true }), Timeout: 30 * time.Second},
				{Name: "cut and store the handle", Do: func(ctx context.Context, r *run) error {
					name, err := r.dynamicContent(ctx, "snap")
					if err != nil {
						return err
					}
					v, err := r.w.env.Snap.SnapshotV1().VolumeSnapshots(r.ns).Get(ctx, "snap", metav1.GetOptions{})
					if err != nil {
						return err
					}
					id, err := r.cut(ctx, "snapshot-"+string(v.UID), "vol-data")
					if err != nil {
						return err
					}
					return retryConflict(func() error {
						c, err := r.w.env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
						if err != nil {
							return err
						}
						ready, size, at := true, int64(snapshotSize), time.Now().UnixNano()
						c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &id, ReadyToUse: &ready, RestoreSize: &size, CreationTime: &at}
						_, err = r.w.env.Snap.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, c, metav1.UpdateOptions{})
						return err
					})
				}, Until: vsReady("snap"), Timeout: 30 * time.Second},
				{Name: "start CSI side", Do: func(ctx context.Context, r *run) error { return r.startCSI(ctx) }},
				deleteSnapAll("snap"),
			},
		},
		{
			Name: "bound-elsewhere", Title: "snapshot naming a content that is bound to another snapshot",
			Steps: []step{
				{Name: "cut, import for someone else, claim it", Do: func(ctx context.Context, r *run) error {
					id, err := r.cut(ctx, "other", "vol-src")
					if err != nil {
						return err
					}
					if err := r.importContent(ctx, "c", id, "someone-else", "", "", snapv1.VolumeSnapshotContentDelete); err != nil {
						return err
					}
					return r.staticOnceSettled(ctx, "thief", "")
				}, Until: vsError("thief"), Timeout: 30 * time.Second},
				deleteSnap("thief"),
			},
		},
		restoreScenario("restore-delete-ds", "delete a Delete snapshot while a claim restores from it (dataSource), then delete the claim", snapv1.VolumeSnapshotContentDelete, false, false, true),
		restoreScenario("restore-delete-ref", "delete a Delete snapshot while a claim restores from it (dataSourceRef), then bind the claim", snapv1.VolumeSnapshotContentDelete, true, true, false),
		restoreScenario("restore-retain-ds", "delete a Retain snapshot while a claim restores from it (dataSource), then bind the claim", snapv1.VolumeSnapshotContentRetain, false, true, false),
		restoreScenario("restore-retain-ref", "delete a Retain snapshot while a claim restores from it (dataSourceRef), then delete the claim", snapv1.VolumeSnapshotContentRetain, true, false, false),
		{
			Name: "retain-content-deleted", Title: "delete a bound Retain content while its snapshot lives, then the snapshot",
			Policy: snapv1.VolumeSnapshotContentRetain,
			Steps: []step{
				createDynamic(),
				{Name: "delete content", Do: func(ctx context.Context, r *run) error {
					name, err := r.dynamicContent(ctx, "snap")
					if err != nil {
						return err
					}
					return r.deleteContent(ctx, name)
				}, Quiet: 5 * time.Second},
				deleteSnapAll("snap"),
			},
		},
		{
			Name: "copied-content", Title: "delete a Delete content whose ref has a uid but whose snapshot does not exist (copied from another cluster)",
			Steps: []step{
				{Name: "import copied content", Do: func(ctx context.Context, r *run) error {
					id, err := r.cut(ctx, "copied", "vol-src")
					if err != nil {
						return err
					}
					const uid = "5e1f0c2a-7d3b-4c6e-9a8f-0b1c2d3e4f50"
					r.learnUID(uid, "VolumeSnapshot/in-another-cluster")
					return r.importContent(ctx, "c", id, "gone", uid, "", snapv1.VolumeSnapshotContentDelete)
				}},
				{Name: "delete content", Do: func(ctx context.Context, r *run) error { return r.deleteContent(ctx, r.contentName("c")) },
					Quiet: 5 * time.Second},
			},
			// The community keeps the backend snapshot of a content whose
			// snapshot it cannot find, and with it the content.
			Terminating: []string{"VolumeSnapshotContent/<ns>-c"},
		},
		{
			Name: "delete-in-flight", Title: "delete the snapshot while CreateSnapshot is in flight (driver holds the answer)",
			Faults: []framework.FaultRule{{Method: "CreateSnapshot", Hang: csitest.Duration(10 * time.Second), Times: 1}},
			Steps: []step{
				{Name: "create, cut hangs", Do: claimAndSnap, Until: all(backendCount(1), vsBound("snap")), Timeout: 6 * time.Second, Quiet: time.Second},
				{Name: "delete snap", Do: deleting("snap"), Until: all(vsGone("snap"), contentsGone, backendCount(0)), Timeout: 45 * time.Second},
			},
			// The community csi-snapshotter may store the content its own
			// create wrote and then skip the informer's copy of that
			// version, which carries the deletion: nothing deletes it until
			// its 15-minute resync.
			CommunityCSIStuck: []string{"VolumeSnapshot/snap", "VolumeSnapshotContent/snapcontent-<uid:VolumeSnapshot/snap>"},
		},
		{
			Name: "no-csi", Title: "snapshot of a driver whose CSI side does not run; then delete it",
			CSI: csiNone,
			Steps: []step{
				{Name: "create", Do: claimAndSnap, Quiet: 5 * time.Second},
				{Name: "delete snap", Do: deleting("snap"), Quiet: 5 * time.Second},
			},
			// Nothing can call DeleteSnapshot without the CSI side: the
			// content (and its snapshot) wait for it.
			Terminating: []string{"VolumeSnapshot/snap", "VolumeSnapshotContent/snapcontent-<uid:VolumeSnapshot/snap>"},
		},
		{
			Name: "not-ready", Title: "driver reports not ready for a while, then ready", Short: true,
			Faults: []framework.FaultRule{{Method: "*", NotReady: 3}},
			Steps:  []step{createDynamic(), deleteSnapAll("snap")},
		},
		driverErrorThenRecovery("final-error", "driver fails CreateSnapshot with a final error, then recovers",
			"InvalidArgument", "bad request"),
		driverErrorThenRecovery("progress-error", "driver fails CreateSnapshot with an in-progress error (Unavailable), then recovers",
			"Unavailable", "backend busy"),
		{
			Name: "secrets", Title: "class with snapshotter and list secrets: which call gets which secret", Short: true,
			ClassParams: map[string]string{
				snapshot.ParamSecretName: "create-secret", snapshot.ParamSecretNamespace: "secrets",
				snapshot.ParamListSecretName: "list-secret", snapshot.ParamListSecretNamespace: "secrets",
				"tier": "gold",
			},
			Faults: []framework.FaultRule{{Method: "*", NotReady: 2}},
			Steps: []step{
				{Name: "create", Do: seq(
					func(ctx context.Context, r *run) error {
						return r.secret(ctx, "create-secret", "create-user", "create-password")
					},
					func(ctx context.Context, r *run) error { return r.secret(ctx, "list-secret", "list-user") },
					func(ctx context.Context, r *run) error { return r.pvc(ctx, "data", framework.PVCOptions{}) },
					func(ctx context.Context, r *run) error { return r.snapshot(ctx, "snap", "data", r.className()) },
				), Until: vsReady("snap")},
				{Name: "import", Do: func(ctx context.Context, r *run) error {
					id, err := r.cut(ctx, "imported", "vol-src")
					if err != nil {
						return err
					}
					if err := r.importContent(ctx, "c", id, "imported", "", r.className(), snapv1.VolumeSnapshotContentDelete); err != nil {
						return err
					}
					return r.staticOnceSettled(ctx, "imported", r.className())
				}, Until: vsReady("imported")},
				{Name: "delete both", Do: seq(
					deleting("snap"),
					deleting("imported"),
				), Until: all(vsGone("snap"), vsGone("imported"), contentsGone)},
			},
		},
		{
			Name: "extra-metadata", Title: "CSI side with --extra-create-metadata, class with a parameter",
			CSIArgs:     []string{"--extra-create-metadata"},
			ClassParams: map[string]string{"tier": "gold"},
			Steps:       []step{createDynamic(), deleteSnapAll("snap")},
		},
		{
			Name: "distributed", Title: "distributed snapshotting: volume pinned to a node by a driver topology key, per-node CSI sides",
			BinderArgs: []string{"--enable-distributed-snapshotting"},
			CSI:        csiNodes, Nodes: []string{"distributed-node-a", "distributed-node-b"},
			Steps: []step{
				{Name: "nodes", Do: seq(
					func(ctx context.Context, r *run) error {
						return r.node(ctx, "distributed-node-a", map[string]string{topologyKey: "distributed-node-a"})
					},
					func(ctx context.Context, r *run) error {
						return r.node(ctx, "distributed-node-b", map[string]string{topologyKey: "distributed-node-b"})
					},
				)},
				{Name: "create", Do: seq(
					func(ctx context.Context, r *run) error {
						return r.pvc(ctx, "data", framework.PVCOptions{Node: "distributed-node-a", TopologyKey: topologyKey})
					},
					func(ctx context.Context, r *run) error { return r.snapshot(ctx, "snap", "data", r.className()) },
				), Until: vsReady("snap"), Timeout: 30 * time.Second},
				deleteSnapAll("snap"),
			},
			// Without the node label nothing on any node may cut or delete.
			Terminating: nil,
		},
		{
			Name: "bound-late", Title: "claim bound only after the snapshot was created",
			Steps: []step{
				{Name: "pending claim, snapshot", Do: seq(
					func(ctx context.Context, r *run) error { return r.pendingPVC(ctx, "data") },
					func(ctx context.Context, r *run) error { return r.snapshot(ctx, "snap", "data", r.className()) },
				), Quiet: 5 * time.Second},
				{Name: "bind claim", Do: func(ctx context.Context, r *run) error { return r.bindPVC(ctx, "data") },
					Until: vsReady("snap"), Timeout: 90 * time.Second},
				deleteSnapAll("snap"),
			},
		},
		{
			Name: "two-defaults", Title: "two default classes for the driver, snapshot without a class name",
			NoClass: true,
			Steps: []step{
				{Name: "two default classes, snapshot", Do: seq(
					func(ctx context.Context, r *run) error { return r.class(ctx, r.className()+"-a", "", nil, true) },
					func(ctx context.Context, r *run) error { return r.class(ctx, r.className()+"-b", "", nil, true) },
					func(ctx context.Context, r *run) error { return r.pvc(ctx, "data", framework.PVCOptions{}) },
					func(ctx context.Context, r *run) error { return r.snapshot(ctx, "snap", "data", "") },
				), Until: vsError("snap"), Timeout: 30 * time.Second},
				deleteSnapAll("snap"),
			},
		},
		{
			Name: "source-deleted", Title: "source claim deleted while the cut is in flight",
			Faults: []framework.FaultRule{{Method: "CreateSnapshot", Hang: csitest.Duration(10 * time.Second), Times: 1}},
			Steps: []step{
				{Name: "create, cut hangs", Do: claimAndSnap, Until: all(backendCount(1), vsBound("snap")), Timeout: 6 * time.Second, Quiet: time.Second},
				{Name: "delete claim", Do: func(ctx context.Context, r *run) error { return r.deletePVC(ctx, "data") },
					Until: all(vsReady("snap"), pvcGone("data"))},
				deleteSnapAll("snap"),
			},
		},
		{
			Name: "no-mode-conversion", Title: "binder with --prevent-volume-mode-conversion=false",
			BinderArgs: []string{"--prevent-volume-mode-conversion=false"},
			Steps:      []step{createDynamic(), deleteSnapAll("snap")},
		},
		{
			Name: "no-time-size", Title: "driver that returns no creation time and no size",
			NoSize: true, Faults: []framework.FaultRule{{Method: "*", NoCreationTime: true}},
			Steps: []step{createDynamic(), deleteSnapAll("snap")},
		},
	}
}

// topologyKey is the distributed scenario's driver topology label.
const topologyKey = "topology.conformance.csi/node"

// driverErrorThenRecovery: CreateSnapshot fails with code until the driver
// recovers; the error shows on the snapshot, which then becomes ready.
func driverErrorThenRecovery(name, title, code, message string) *scenario {
	return &scenario{
		Name: name, Title: title,
		Faults: []framework.FaultRule{{Method: "CreateSnapshot", Code: code, Message: message}},
		Steps: []step{
			{Name: "create", Do: claimAndSnap, Until: vsError("snap"), Timeout: 30 * time.Second},
			{Name: "driver recovers", Do: func(ctx context.Context, r *run) error { return r.setFaults(ctx) },
				Until: vsReady("snap"), Timeout: 90 * time.Second},
			deleteSnapAll("snap"),
		},
	}
}
