package binder

import (
	"fmt"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// indexByDriverLease: on Leases, the DriverLeaseKey of a CSI side Lease.
const indexByDriverLease = "driverLease"

// csiPresence tells whether a CSI side serves a driver, from the Leases CSI
// sides hold (snapshot.LeaseDriverKey), so a snapshot whose content no CSI
// side ever touches says why instead of waiting in silence.
type csiPresence struct {
	index   cache.Indexer
	synced  cache.InformerSynced
	after   time.Duration
	enqueue func(key string)

	mu sync.Mutex
	// waiting: driver key -> snapshot keys that show the no-CSI-side
	// error; a fresh Lease of the driver re-queues them.
	waiting map[string]map[string]struct{}
}

func newPresence(inf coordinformers.LeaseInformer, after time.Duration, enqueue func(string)) (*csiPresence, error) {
	i := inf.Informer()
	if err := i.AddIndexers(cache.Indexers{indexByDriverLease: leaseDriverIndex}); err != nil {
		return nil, fmt.Errorf("lease indexers: %w", err)
	}
	p := &csiPresence{index: i.GetIndexer(), synced: i.HasSynced, after: after, enqueue: enqueue,
		waiting: map[string]map[string]struct{}{}}
	if _, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.onLease,
		UpdateFunc: func(_, obj any) { p.onLease(obj) },
	}); err != nil {
		return nil, fmt.Errorf("lease handler: %w", err)
	}
	return p, nil
}

func leaseDriverIndex(obj any) ([]string, error) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, nil
	}
	if k, ok := snapshot.LeaseDriverKey(l); ok {
		return []string{k}, nil
	}
	return nil, nil
}

// onLease re-queues the snapshots that wait for the Lease's driver when
// the Lease is fresh. Renewals of a driver nobody waits for cost nothing.
func (p *csiPresence) onLease(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	key, ok := snapshot.LeaseDriverKey(l)
	if !ok {
		return
	}
	if until, ok := snapshot.LeaseFreshUntil(l); !ok || !time.Now().Before(until) {
		return
	}
	p.mu.Lock()
	keys := p.waiting[key]
	delete(p.waiting, key)
	p.mu.Unlock()
	for k := range keys {
		p.enqueue(k)
	}
}

// freshUntil is the latest time until which a Lease of the driver key
// counts as alive; seen is false when the driver has no Lease at all.
func (p *csiPresence) freshUntil(key string) (until time.Time, seen bool) {
	objs, err := p.index.ByIndex(indexByDriverLease, key)
	if err != nil {
		return time.Time{}, false
	}
	for _, obj := range objs {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			continue
		}
		seen = true
		if t, ok := snapshot.LeaseFreshUntil(l); ok && t.After(until) {
			until = t
		}
	}
	return until, seen
}

// NoCSISideMessage is the status error of a snapshot whose driver has no
// CSI side.
func NoCSISideMessage(driver string) string {
	return fmt.Sprintf("no CSI side (csi-snapshotter or snapkeeper --components=csi) is running for driver %s; deploy one next to the driver "+
		"(no fresh Lease %s, nor one labelled %s=%s, in any namespace)",
		driver, snapshot.CSILeaseName(driver), snapshot.LabelCSIHeartbeatDriver, driver)
}

// check returns the error vs must show because no CSI side has touched its
// content for longer than the delay and none holds a fresh Lease, and when
// to look again (0: no need). The error's time is derived from the objects,
// so that re-syncs compute the same status and write nothing.
func (p *csiPresence) check(vs *snapv1.VolumeSnapshot, content *snapv1.VolumeSnapshotContent, now time.Time) (*snapv1.VolumeSnapshotError, time.Duration) {
	if p == nil || p.after <= 0 || !p.synced() || content.Status != nil || cutInFlight(content) || content.DeletionTimestamp != nil {
		return nil, 0
	}
	key := snapshot.DriverLeaseKey(content.Spec.Driver)
	until, seen := p.freshUntil(key)
	if now.Before(until) {
		// Served: look again when the Lease would go stale.
		return nil, max(until.Sub(now), p.after)
	}
	since := content.CreationTimestamp.Time
	if seen && until.After(since) {
		since = until // the CSI side went away after the content was made
	}
	at := since.Add(p.after)
	if now.Before(at) {
		return nil, at.Sub(now) + time.Second
	}
	p.mu.Lock()
	if p.waiting[key] == nil {
		p.waiting[key] = map[string]struct{}{}
	}
	p.waiting[key][objKey(vs.Namespace, vs.Name)] = struct{}{}
	p.mu.Unlock()
	msg := NoCSISideMessage(content.Spec.Driver)
	t := metav1.NewTime(at.Truncate(time.Second))
	return &snapv1.VolumeSnapshotError{Time: &t, Message: &msg}, 0
}

// minPositive is the shorter of two delays, ignoring a zero one.
func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 || a <= b {
		return a
	}
	return b
}

// servedNow reports whether a fresh Lease of driver is in the cache.
func (p *csiPresence) servedNow(driver string) bool {
	until, _ := p.freshUntil(snapshot.DriverLeaseKey(driver))
	return time.Now().Before(until)
}
