// Package clusterlookup serves the webhook's validation.Lookup from the
// cluster: informer caches of classes, snapshots, contents, claims and
// volumes, the few reads that must be live, the group classes once their
// CRD is served, and the registered volume populators. It is apart from
// package admission so that the request path (decoding, validation,
// answers, and its fuzz targets) builds without the client libraries.
package clusterlookup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclientset "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// freshReadTimeout bounds the direct read of classes from the API server, so
// a slow API server costs a warning, not the caller's whole webhook timeout.
const freshReadTimeout = 3 * time.Second

// Lookup serves validation.Lookup from informer caches, with the
// one read that must be fresh (the classes, when a new default is judged)
// going to the API server.
type Lookup struct {
	classes    snaplisters.VolumeSnapshotClassLister
	snapshots  snaplisters.VolumeSnapshotLister
	contents   snaplisters.VolumeSnapshotContentLister
	pvcs       corelisters.PersistentVolumeClaimLister
	pvs        corelisters.PersistentVolumeLister
	client     snapclientset.Interface
	populators *PopulatorCache
	groups     *groupClasses
	// kube, when set, reads the claims a group selector matches (and a
	// volume the cache does not hold yet) from the API server: see
	// ReadClaimsLive.
	kube   kubernetes.Interface
	synced []cache.InformerSynced
}

// New registers the informers it needs with the factories;
// start the factories afterwards, and call WatchGroupClasses for the
// VolumeGroupSnapshotClasses. populators may be nil (none registered).
func New(snaps snapinformers.SharedInformerFactory, core informers.SharedInformerFactory,
	client snapclientset.Interface, populators *PopulatorCache) *Lookup {
	v1 := snaps.Snapshot().V1()
	l := &Lookup{
		classes:    v1.VolumeSnapshotClasses().Lister(),
		snapshots:  v1.VolumeSnapshots().Lister(),
		contents:   v1.VolumeSnapshotContents().Lister(),
		pvcs:       core.Core().V1().PersistentVolumeClaims().Lister(),
		pvs:        core.Core().V1().PersistentVolumes().Lister(),
		client:     client,
		populators: populators,
		groups:     &groupClasses{client: client},
	}
	l.synced = []cache.InformerSynced{
		v1.VolumeSnapshotClasses().Informer().HasSynced,
		v1.VolumeSnapshots().Informer().HasSynced,
		v1.VolumeSnapshotContents().Informer().HasSynced,
		core.Core().V1().PersistentVolumeClaims().Informer().HasSynced,
		core.Core().V1().PersistentVolumes().Informer().HasSynced,
		l.groups.hasSynced,
	}
	return l
}

// Synced is the /readyz check of the caches.
func (l *Lookup) Synced() error {
	for _, s := range l.synced {
		if !s() {
			return errors.New("informer caches not synced yet")
		}
	}
	return nil
}

// ForRequest binds the lookup to a request's context.
func (l *Lookup) ForRequest(ctx context.Context) validation.Lookup {
	return requestLookup{l: l, ctx: ctx}
}

type requestLookup struct {
	l   *Lookup
	ctx context.Context
}

// absent turns a lister's NotFound into the (nil, nil) of validation.Lookup.
func absent[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

func (r requestLookup) ListClasses() ([]*snapv1.VolumeSnapshotClass, error) {
	return r.l.classes.List(labels.Everything())
}

func (r requestLookup) ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error) {
	ctx, cancel := context.WithTimeout(r.ctx, freshReadTimeout)
	defer cancel()
	// An empty resourceVersion asks for a quorum read from etcd: the
	// newest state, including a class created a moment ago.
	list, err := r.l.client.SnapshotV1().VolumeSnapshotClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*snapv1.VolumeSnapshotClass, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// GetClass reads the cache, and the API server when the cache does not hold
// the class: a class created a moment ago (applied in the same sync as the
// snapshot naming it) must be judged as it is.
func (r requestLookup) GetClass(name string) (*snapv1.VolumeSnapshotClass, error) {
	if c, err := absent(r.l.classes.Get(name)); c != nil || err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(r.ctx, freshReadTimeout)
	defer cancel()
	c, err := r.l.client.SnapshotV1().VolumeSnapshotClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading VolumeSnapshotClass %q: %w", name, err)
	}
	return c, nil
}

func (r requestLookup) GetSnapshot(namespace, name string) (*snapv1.VolumeSnapshot, error) {
	return absent(r.l.snapshots.VolumeSnapshots(namespace).Get(name))
}

func (r requestLookup) GetContent(name string) (*snapv1.VolumeSnapshotContent, error) {
	return absent(r.l.contents.Get(name))
}

// ClassInUse scans the contents: it runs only when a class changes its
// driver or deletion policy, which is rare enough not to need an index.
func (r requestLookup) ClassInUse(name string) (bool, error) {
	contents, err := r.l.contents.List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, c := range contents {
		if c.Spec.VolumeSnapshotClassName != nil && *c.Spec.VolumeSnapshotClassName == name {
			return true, nil
		}
	}
	return false, nil
}

func (r requestLookup) GetPVC(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return absent(r.l.pvcs.PersistentVolumeClaims(namespace).Get(name))
}

func (r requestLookup) ListPVCs(namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	if r.l.kube != nil {
		if claims, err := r.listPVCsLive(namespace, selector); err == nil {
			return claims, nil
		}
	}
	return r.l.pvcs.PersistentVolumeClaims(namespace).List(selector)
}

func (r requestLookup) GetPV(name string) (*corev1.PersistentVolume, error) {
	pv, err := absent(r.l.pvs.Get(name))
	if pv != nil || err != nil || r.l.kube == nil {
		return pv, err
	}
	return r.getPVLive(name)
}

func (r requestLookup) PopulatorRegistered(group, kind string) (bool, error) {
	if r.l.populators == nil {
		return false, nil
	}
	return r.l.populators.Registered(r.ctx, group, kind)
}

// VolumePopulatorResource is the resource of VolumePopulator objects.
var VolumePopulatorResource = schema.GroupVersionResource{
	Group: "populator.storage.k8s.io", Version: "v1beta1", Resource: "volumepopulators",
}

// PopulatorCache answers "does a VolumePopulator register this kind" from a
// list refreshed at most every ttl. It lists on demand instead of watching
// because claims with a populator source are rare and the CRD is often not
// installed at all (then nothing is registered).
type PopulatorCache struct {
	client dynamic.Interface
	ttl    time.Duration

	mu      sync.Mutex
	kinds   map[schema.GroupKind]bool
	fetched time.Time
}

// NewPopulatorCache returns a cache over client; ttl <= 0 means 30 s.
func NewPopulatorCache(client dynamic.Interface, ttl time.Duration) *PopulatorCache {
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return &PopulatorCache{client: client, ttl: ttl}
}

// Registered reports whether group/kind is registered.
func (p *PopulatorCache) Registered(ctx context.Context, group, kind string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kinds == nil || time.Since(p.fetched) > p.ttl {
		kinds, err := p.fetch(ctx)
		if err != nil {
			return false, err
		}
		p.kinds, p.fetched = kinds, time.Now()
	}
	return p.kinds[schema.GroupKind{Group: group, Kind: kind}], nil
}

func (p *PopulatorCache) fetch(ctx context.Context) (map[schema.GroupKind]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, freshReadTimeout)
	defer cancel()
	list, err := p.client.Resource(VolumePopulatorResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return map[schema.GroupKind]bool{}, nil // CRD not installed
	}
	if err != nil {
		return nil, fmt.Errorf("listing VolumePopulators: %w", err)
	}
	kinds := make(map[schema.GroupKind]bool, len(list.Items))
	for _, item := range list.Items {
		group, _, _ := unstructured.NestedString(item.Object, "sourceKind", "group")
		kind, _, _ := unstructured.NestedString(item.Object, "sourceKind", "kind")
		kinds[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	return kinds, nil
}
