package binder

import (
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Phases of snapkeeper_snapshots (docs/metrics.md).
const (
	PhaseReady    = "ready"
	PhasePending  = "pending"
	PhaseError    = "error"
	PhaseDeleting = "deleting"

	unknownDriver = "unknown"
)

var phases = []string{PhaseReady, PhasePending, PhaseError, PhaseDeleting}

// GaugeOptions configure NewGauges.
type GaugeOptions struct {
	// WithoutCSISide reports whether a driver has no running CSI side
	// (a presence tracker feeds it). Nil: snapkeeper_driver_without_csi_side
	// is not exposed.
	WithoutCSISide func(driver string) bool
	// Now is the clock of the time-to-ready histogram; nil is time.Now.
	Now func() time.Time
}

// Gauges is a prometheus.Collector of the binder's state. Every gauge is
// computed from the binder's informer caches when it is scraped, so nothing
// can drift; only the time-to-ready histogram is fed by informer events,
// once per snapshot that turns ready while this process watches.
type Gauges struct {
	c    *Controller
	opts GaugeOptions

	timeToReady                   *prometheus.HistogramVec
	snapshots, defaults           *prometheus.Desc
	groupDefaults, withoutCSISide *prometheus.Desc
}

// NewGauges makes the collector of c and subscribes the time-to-ready
// histogram to its snapshot informer. Register it on the binder's registry.
func NewGauges(c *Controller, opts GaugeOptions) (*Gauges, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Gauges{
		c:    c,
		opts: opts,
		timeToReady: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snapkeeper_snapshot_time_to_ready_seconds",
			Help:    "Time from a VolumeSnapshot's creationTimestamp to the moment it turned ready, for snapshots that turned ready while this process watched.",
			Buckets: []float64{1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"driver"}),
		snapshots: prometheus.NewDesc("snapkeeper_snapshots",
			"VolumeSnapshots in the binder's cache by driver, class and phase (ready, pending, error, deleting).",
			[]string{"driver", "class", "phase"}, nil),
		defaults: prometheus.NewDesc("snapkeeper_driver_default_classes",
			"Default VolumeSnapshotClasses of each driver that has a class; more than 1 makes snapshots without a class fail.",
			[]string{"driver"}, nil),
		groupDefaults: prometheus.NewDesc("snapkeeper_driver_default_group_classes",
			"Default VolumeGroupSnapshotClasses of each driver that has a group class.",
			[]string{"driver"}, nil),
		withoutCSISide: prometheus.NewDesc("snapkeeper_driver_without_csi_side",
			"1 when a driver of a class or snapshot has no running CSI side, else 0.",
			[]string{"driver"}, nil),
	}
	inf := c.cfg.SnapInformers.Snapshot().V1().VolumeSnapshots().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: g.onUpdate}); err != nil {
		return nil, err
	}
	return g, nil
}

// onUpdate observes a snapshot that turns ready. Adds are not transitions
// (a restart lists every ready snapshot again), and resyncs compare an
// object with itself, so each snapshot is counted at most once per process.
func (g *Gauges) onUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*snapv1.VolumeSnapshot)
	vs, ok2 := newObj.(*snapv1.VolumeSnapshot)
	if !ok1 || !ok2 || isReady(old) || !isReady(vs) || vs.DeletionTimestamp != nil {
		return
	}
	driver, _ := g.driverAndClass(vs)
	d := g.opts.Now().Sub(vs.CreationTimestamp.Time)
	g.timeToReady.WithLabelValues(driver).Observe(max(0, d.Seconds()))
}

func isReady(vs *snapv1.VolumeSnapshot) bool {
	return vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse
}

// phaseOf is the snapshot's phase: deleting, then ready, error, pending.
func phaseOf(vs *snapv1.VolumeSnapshot) string {
	switch {
	case vs.DeletionTimestamp != nil:
		return PhaseDeleting
	case isReady(vs):
		return PhaseReady
	case vs.Status != nil && vs.Status.Error != nil:
		return PhaseError
	default:
		return PhasePending
	}
}

// driverAndClass names a snapshot's driver (its content's, else its
// class's, else "unknown") and class (its own, else its content's, else "").
func (g *Gauges) driverAndClass(vs *snapv1.VolumeSnapshot) (string, string) {
	driver, class := "", ""
	if vs.Spec.VolumeSnapshotClassName != nil {
		class = *vs.Spec.VolumeSnapshotClassName
	}
	if content, err := g.c.contents.Get(contentNameOf(vs)); err == nil {
		driver = content.Spec.Driver
		if class == "" && content.Spec.VolumeSnapshotClassName != nil {
			class = *content.Spec.VolumeSnapshotClassName
		}
	}
	if driver == "" {
		driver = g.c.classDriver(class)
	}
	if driver == "" {
		driver = unknownDriver
	}
	return driver, class
}

// classDriver is the driver of the VolumeSnapshotClass named class, or ""
// when there is no such class in the cache.
func (c *Controller) classDriver(class string) string {
	if class == "" {
		return ""
	}
	if cl, err := c.classes.Get(class); err == nil {
		return cl.Driver
	}
	return ""
}

// Describe implements prometheus.Collector.
func (g *Gauges) Describe(ch chan<- *prometheus.Desc) {
	g.timeToReady.Describe(ch)
	ch <- g.snapshots
	ch <- g.defaults
	ch <- g.groupDefaults
	ch <- g.withoutCSISide
}

// Collect implements prometheus.Collector. Before the caches have synced
// only the histogram is exposed: a partial cache would report false zeros.
func (g *Gauges) Collect(ch chan<- prometheus.Metric) {
	g.timeToReady.Collect(ch)
	if !g.c.HasSynced() {
		return
	}
	drivers := g.collectSnapshots(ch)
	g.collectDefaults(ch, drivers)
	if without := g.withoutCSISideFunc(); without != nil {
		for d := range drivers {
			if d == unknownDriver {
				continue
			}
			ch <- gauge(g.withoutCSISide, boolValue(without(d)), d)
		}
	}
}

// withoutCSISideFunc is GaugeOptions.WithoutCSISide, else the binder's CSI
// presence tracker (csipresence.go) once its Leases have synced: a driver
// without a fresh CSI side Lease has no CSI side. Nil when neither answers.
func (g *Gauges) withoutCSISideFunc() func(string) bool {
	if g.opts.WithoutCSISide != nil {
		return g.opts.WithoutCSISide
	}
	p := g.c.presence
	if p == nil || !p.synced() {
		return nil
	}
	return func(driver string) bool {
		until, _ := p.freshUntil(snapshot.DriverLeaseKey(driver))
		return !g.opts.Now().Before(until)
	}
}

type snapshotKey struct{ driver, class, phase string }

// collectSnapshots counts snapshots by driver, class and phase. Every class,
// and every driver/class pair a snapshot has, gets all four phases, zeros
// included, so that an alert sees a count drop to 0. It returns the drivers
// seen.
func (g *Gauges) collectSnapshots(ch chan<- prometheus.Metric) map[string]bool {
	counts := map[snapshotKey]int{}
	drivers := map[string]bool{}
	pair := func(driver, class string) {
		drivers[driver] = true
		for _, p := range phases {
			counts[snapshotKey{driver, class, p}] += 0
		}
	}
	classes, _ := g.c.classes.List(labels.Everything())
	for _, cl := range classes {
		pair(cl.Driver, cl.Name)
	}
	snaps, _ := g.c.snapshots.List(labels.Everything())
	for _, vs := range snaps {
		driver, class := g.driverAndClass(vs)
		pair(driver, class)
		counts[snapshotKey{driver, class, phaseOf(vs)}]++
	}
	for k, n := range counts {
		ch <- gauge(g.snapshots, float64(n), k.driver, k.class, k.phase)
	}
	return drivers
}

// collectDefaults counts default classes (and group classes, when group
// snapshots are on) of every driver that has one.
func (g *Gauges) collectDefaults(ch chan<- prometheus.Metric, drivers map[string]bool) {
	defaults := map[string]int{}
	classes, _ := g.c.classes.List(labels.Everything())
	for _, cl := range classes {
		defaults[cl.Driver] += boolInt(snapshot.IsDefaultClass(cl.Annotations))
	}
	for d, n := range defaults {
		ch <- gauge(g.defaults, float64(n), d)
	}
	if g.c.groupClasses == nil {
		return
	}
	groupDefaults := map[string]int{}
	groupClasses, _ := g.c.groupClasses.List(labels.Everything())
	for _, cl := range groupClasses {
		drivers[cl.Driver] = true
		groupDefaults[cl.Driver] += boolInt(snapshot.IsDefaultGroupClass(cl.Annotations))
	}
	for d, n := range groupDefaults {
		ch <- gauge(g.groupDefaults, float64(n), d)
	}
}

func gauge(desc *prometheus.Desc, v float64, labelValues ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labelValues...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func boolValue(b bool) float64 { return float64(boolInt(b)) }
