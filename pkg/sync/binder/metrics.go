package binder

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Operation names and label values users already scrape (docs/contract.md, docs/metrics.md).
const (
	OpCreateSnapshot         = "CreateSnapshot"
	OpCreateSnapshotAndReady = "CreateSnapshotAndReady"
	OpDeleteSnapshot         = "DeleteSnapshot"
	// Group snapshot operations.
	OpCreateGroupSnapshot         = "CreateGroupSnapshot"
	OpCreateGroupSnapshotAndReady = "CreateGroupSnapshotAndReady"
	OpDeleteGroupSnapshot         = "DeleteGroupSnapshot"

	typeDynamic        = "dynamic"
	typePreProvisioned = "pre-provisioned"
)

// Metrics are the community-compatible operation metrics.
type Metrics struct {
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge

	mu      sync.Mutex
	flights map[flightKey]struct{}
}

type flightKey struct {
	uid types.UID
	op  string
}

// NewMetrics registers the metrics on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snapshot_controller_operation_total_seconds",
			Help:    "Total time of snapshot operations, from the user's request to their end.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600},
		}, []string{"driver_name", "operation_name", "operation_status", "snapshot_type"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "snapshot_controller_operations_in_flight",
			Help: "Snapshot operations started and not yet finished.",
		}),
		flights: map[flightKey]struct{}{},
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.inFlight)
	}
	return m
}

// start marks an operation as in flight (idempotent).
func (m *Metrics) start(uid types.UID, op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := flightKey{uid, op}
	if _, ok := m.flights[k]; !ok {
		m.flights[k] = struct{}{}
		m.inFlight.Set(float64(len(m.flights)))
	}
}

// finish records an operation that began at since and ends now.
func (m *Metrics) finish(uid types.UID, op, driver, snapType, status string, since time.Time) {
	m.mu.Lock()
	k := flightKey{uid, op}
	_, was := m.flights[k]
	delete(m.flights, k)
	m.inFlight.Set(float64(len(m.flights)))
	m.mu.Unlock()
	if !was {
		// Not started by this process (it restarted, or another
		// controller started it): the duration is unknown.
		return
	}
	if driver == "" {
		driver = "unknown"
	}
	m.duration.WithLabelValues(driver, op, status, snapType).Observe(time.Since(since).Seconds())
}

// ops are a kind's three operations.
type ops struct{ create, createAndReady, delete string }

var (
	snapshotOps = ops{OpCreateSnapshot, OpCreateSnapshotAndReady, OpDeleteSnapshot}
	groupOps    = ops{OpCreateGroupSnapshot, OpCreateGroupSnapshotAndReady, OpDeleteGroupSnapshot}
)

// released ends the operations of a deleted snapshot or group once its
// finalizers are gone: the creates as cancelled (a no-op when they ended),
// the delete as a success.
func (m *Metrics) released(uid types.UID, o ops, driver, snapType string, created, deleted time.Time) {
	m.finish(uid, o.create, driver, snapType, "cancel", created)
	m.finish(uid, o.createAndReady, driver, snapType, "cancel", created)
	m.finish(uid, o.delete, driver, snapType, "success", deleted)
}
