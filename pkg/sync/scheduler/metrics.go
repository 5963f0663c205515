package scheduler

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Metrics are the schedule component's series, by schedule_namespace and
// schedule: not "namespace", which the scrape gives the controller pod's
// (docs/metrics.md).
type Metrics struct {
	runs    *prometheus.CounterVec
	missed  *prometheus.CounterVec
	deletes *prometheus.CounterVec
	kept    *prometheus.GaugeVec
	failing *prometheus.GaugeVec
}

// runResults are the values of snapkeeper_schedule_runs_total's result.
var runResults = []string{"cut", "partial", "no_claims", "failed"}

// NewMetrics registers the series with reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"schedule_namespace", "schedule"}
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snapkeeper_schedule_runs_total",
			Help: "Scheduled runs by result: cut (every selected claim), partial (some claims skipped: not bound, or two snapshots not ready yet), no_claims, failed (an API error; retried).",
		}, append(labels, "result")),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snapkeeper_schedule_missed_runs_total",
			Help: "Scheduled times skipped: past startingDeadlineSeconds, or passed while no controller ran beyond the one catch-up run.",
		}, labels),
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snapkeeper_schedule_retention_deletes_total",
			Help: "Snapshots and group snapshots deleted by a schedule's retention.",
		}, labels),
		kept: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snapkeeper_schedule_snapshots_kept",
			Help: "Snapshots (group snapshots in group mode) of a schedule that exist now.",
		}, labels),
		failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snapkeeper_schedule_claims_failing",
			Help: "Claims of a schedule whose newest snapshot failed (not ready, with an error).",
		}, labels),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.missed, m.deletes, m.kept, m.failing)
	}
	return m
}

func (m *Metrics) observe(s *v1alpha1.SnapshotSchedule, sum summary) {
	// The counters exist from the first look at a schedule, at 0: a
	// series that first appears with 1 hides that increment from
	// increase() and rate(), and from the missed-runs alert.
	m.missed.WithLabelValues(s.Namespace, s.Name)
	m.deletes.WithLabelValues(s.Namespace, s.Name)
	for _, result := range runResults {
		m.runs.WithLabelValues(s.Namespace, s.Name, result)
	}
	m.kept.WithLabelValues(s.Namespace, s.Name).Set(float64(sum.kept))
	m.failing.WithLabelValues(s.Namespace, s.Name).Set(float64(len(sum.failing)))
}

// forget drops a deleted schedule's series.
func (m *Metrics) forget(key string) {
	ns, name, _ := strings.Cut(key, "/")
	match := map[string]string{"schedule_namespace": ns, "schedule": name}
	m.runs.DeletePartialMatch(match)
	m.missed.DeletePartialMatch(match)
	m.deletes.DeletePartialMatch(match)
	m.kept.DeletePartialMatch(match)
	m.failing.DeletePartialMatch(match)
}
