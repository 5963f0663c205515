package admission

import (
	"sync"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// DefaultClaimTTL is how long an admitted default class stands in for itself
// in the webhook's fresh class reads before the API server lists it.
const DefaultClaimTTL = 10 * time.Second

// defaultClaims makes concurrent applies of several default classes for one
// driver admit at most one. The rule reads the classes fresh from the API
// server, but a class admitted a moment ago is stored only after the webhook
// answers: ten defaults applied at the same instant all read "no default
// yet". So requests that ask for a default are judged one at a time, and a
// default admitted by this process is added to the fresh reads of later
// requests until the API server lists it itself, or until ttl passes (its
// create failed after admission, or it was a dry run elsewhere).
//
// The memory is per process: with several webhook replicas behind one
// Service, requests that reach different replicas at the same instant can
// still both pass (docs/webhook.md).
type defaultClaims struct {
	mu     sync.Mutex // held for the whole judging of a default class
	ttl    time.Duration
	now    func() time.Time
	single map[string]claim // driver -> the admitted VolumeSnapshotClass
	group  map[string]claim // driver -> the admitted VolumeGroupSnapshotClass
}

type claim struct {
	name  string
	until time.Time
}

func newDefaultClaims(ttl time.Duration) *defaultClaims {
	if ttl <= 0 {
		ttl = DefaultClaimTTL
	}
	return &defaultClaims{ttl: ttl, now: time.Now, single: map[string]claim{}, group: map[string]claim{}}
}

// classAsksDefault returns the driver and the claims map of a class object
// that carries its kind's is-default-class "true"; ok is false for any other
// object.
func (d *defaultClaims) classAsksDefault(obj any) (driver, name string, claims map[string]claim, ok bool) {
	switch c := obj.(type) {
	case *snapv1.VolumeSnapshotClass:
		return c.Driver, c.Name, d.single, c.Annotations[snapshot.AnnDefaultClass] == "true"
	case *groupv1.VolumeGroupSnapshotClass:
		return c.Driver, c.Name, d.group, c.Annotations[snapshot.AnnGroupDefaultClass] == "true"
	}
	return "", "", nil, false
}

// judge runs validate for obj. For a class that asks to be a default it holds
// the lock, shows validate the defaults admitted before, and remembers obj
// when validate admits it and the request is no dry run.
func (d *defaultClaims) judge(obj any, dryRun bool, l validation.Lookup, validate func(validation.Lookup) bool) {
	driver, name, claims, ok := d.classAsksDefault(obj)
	if !ok {
		validate(l)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for drv, c := range claims {
		if now.After(c.until) {
			delete(claims, drv)
		}
	}
	if validate(claimedLookup{Lookup: l, d: d}) && !dryRun {
		claims[driver] = claim{name: name, until: now.Add(d.ttl)}
	}
}

// claimedLookup adds the claimed defaults that the API server does not list
// yet to the fresh class reads. The caller holds d.mu.
type claimedLookup struct {
	validation.Lookup
	d *defaultClaims
}

func (l claimedLookup) ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error) {
	list, err := l.Lookup.ListClassesFresh()
	if err != nil {
		return nil, err
	}
	for driver, c := range unlisted(l.d.single, list, func(x *snapv1.VolumeSnapshotClass) (string, string, bool) {
		return x.Name, x.Driver, x.Annotations[snapshot.AnnDefaultClass] == "true"
	}) {
		list = append(list, &snapv1.VolumeSnapshotClass{ObjectMeta: claimedMeta(c.name, snapshot.AnnDefaultClass),
			Driver: driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete})
	}
	return list, nil
}

func (l claimedLookup) ListGroupClassesFresh() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	list, err := l.Lookup.ListGroupClassesFresh()
	if err != nil {
		return nil, err
	}
	for driver, c := range unlisted(l.d.group, list, func(x *groupv1.VolumeGroupSnapshotClass) (string, string, bool) {
		return x.Name, x.Driver, x.Annotations[snapshot.AnnGroupDefaultClass] == "true"
	}) {
		list = append(list, &groupv1.VolumeGroupSnapshotClass{ObjectMeta: claimedMeta(c.name, snapshot.AnnGroupDefaultClass),
			Driver: driver, DeletionPolicy: snapv1.VolumeSnapshotContentDelete})
	}
	return list, nil
}

// unlisted returns the claims whose class the fresh list does not show as
// the driver's default yet, and forgets the others: from now on the API
// server answers for them. view gives a class's name, driver and whether it
// is a default.
func unlisted[T any](claims map[string]claim, list []T, view func(T) (string, string, bool)) map[string]claim {
	type nameDriver struct{ name, driver string }
	listed := make(map[nameDriver]bool, len(list))
	for _, x := range list {
		if name, driver, isDefault := view(x); isDefault {
			listed[nameDriver{name, driver}] = true
		}
	}
	out := map[string]claim{}
	for driver, c := range claims {
		if listed[nameDriver{c.name, driver}] {
			delete(claims, driver)
			continue
		}
		out[driver] = c
	}
	return out
}

func claimedMeta(name, annotation string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Annotations: map[string]string{annotation: "true"}}
}
