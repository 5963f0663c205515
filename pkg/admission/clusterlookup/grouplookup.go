package clusterlookup

import (
	"context"
	"fmt"
	"sync"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/cachetrim"
)

// DefaultGroupDiscoveryInterval is how often the webhook looks for the
// group snapshot CRDs while they are not installed.
const DefaultGroupDiscoveryInterval = 30 * time.Second

const groupClassesResource = "volumegroupsnapshotclasses"

// groupClasses serves VolumeGroupSnapshotClasses. The group CRDs are
// optional, and an informer on a resource the API server does not serve
// never syncs (the webhook would never become ready), so the informer starts
// only once discovery lists the resource. Until then every read goes to the
// API server, where a missing resource reads as no classes: no group object
// can exist without its CRD, so the group rules have nothing to judge.
type groupClasses struct {
	client snapclientset.Interface

	mu     sync.RWMutex
	lister grouplisters.VolumeGroupSnapshotClassLister // nil until started
	synced cache.InformerSynced
}

// WatchGroupClasses starts the VolumeGroupSnapshotClass informer as soon as
// the API server serves the resource: now, or at the first check (every
// interval, <= 0 means DefaultGroupDiscoveryInterval) that finds it after
// the CRDs are installed. It returns at once; the informer stops with ctx.
func (l *Lookup) WatchGroupClasses(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultGroupDiscoveryInterval
	}
	if l.groups.start(ctx) {
		return
	}
	klog.FromContext(ctx).Info("The group snapshot CRDs are not installed; group snapshot objects cannot exist, so their rules have nothing to judge until they are",
		"resource", groupv1.SchemeGroupVersion.WithResource(groupClassesResource), "checkEvery", interval)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if l.groups.start(ctx) {
					return
				}
			}
		}
	}()
}

// start starts the informer if the resource is served, and reports whether
// it did.
func (g *groupClasses) start(ctx context.Context) bool {
	served, err := g.served()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Could not check whether the group snapshot CRDs are installed; checking again later")
	}
	if !served {
		return false
	}
	factory := snapinformers.NewSharedInformerFactoryWithOptions(g.client, 0, snapinformers.WithTransform(cachetrim.DropManagedFields))
	inf := factory.Groupsnapshot().V1().VolumeGroupSnapshotClasses()
	lister, synced := inf.Lister(), inf.Informer().HasSynced
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	g.mu.Lock()
	g.lister, g.synced = lister, synced
	g.mu.Unlock()
	klog.FromContext(ctx).Info("Watching VolumeGroupSnapshotClasses")
	return true
}

func (g *groupClasses) served() (bool, error) {
	list, err := g.client.Discovery().ServerResourcesForGroupVersion(groupv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", groupv1.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == groupClassesResource {
			return true, nil
		}
	}
	return false, nil
}

// current returns the informer's lister, nil before it started.
func (g *groupClasses) current() grouplisters.VolumeGroupSnapshotClassLister {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.lister
}

// hasSynced is true while no informer runs: there is nothing to wait for.
func (g *groupClasses) hasSynced() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.synced == nil || g.synced()
}

func (r requestLookup) ListGroupClasses() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	if lister := r.l.groups.current(); lister != nil {
		return lister.List(labels.Everything())
	}
	return r.ListGroupClassesFresh()
}

func (r requestLookup) ListGroupClassesFresh() ([]*groupv1.VolumeGroupSnapshotClass, error) {
	ctx, cancel := context.WithTimeout(r.ctx, freshReadTimeout)
	defer cancel()
	list, err := r.l.client.GroupsnapshotV1().VolumeGroupSnapshotClasses().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // the CRD is not installed
	}
	if err != nil {
		return nil, fmt.Errorf("listing VolumeGroupSnapshotClasses: %w", err)
	}
	out := make([]*groupv1.VolumeGroupSnapshotClass, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// GetGroupClass reads the cache, and the API server when the cache does
// not hold the class (not started, or a class created a moment ago: a
// group applied with its class in one sync must be judged against it).
func (r requestLookup) GetGroupClass(name string) (*groupv1.VolumeGroupSnapshotClass, error) {
	if lister := r.l.groups.current(); lister != nil {
		if c, err := absent(lister.Get(name)); c != nil || err != nil {
			return c, err
		}
	}
	ctx, cancel := context.WithTimeout(r.ctx, freshReadTimeout)
	defer cancel()
	c, err := r.l.client.GroupsnapshotV1().VolumeGroupSnapshotClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // no such class, or no CRD
	}
	if err != nil {
		return nil, fmt.Errorf("reading VolumeGroupSnapshotClass %q: %w", name, err)
	}
	return c, nil
}
