package main

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/sync/binder"
)

var registerOnce sync.Once

// retryBackoff is snapkeeper_retry_backoff_seconds, set by
// registerClientMetrics: the backoffs of failed syncs, by loop.
var retryBackoff *prometheus.HistogramVec

// registerClientMetrics exposes client-go's request and workqueue metrics.
// client-go accepts one registration per process.
func registerClientMetrics(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_request_duration_seconds",
			Help:    "Request latency by verb and host.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"verb", "host"})
		results := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "Requests by status code, method and host.",
		}, []string{"code", "method", "host"})
		throttled := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_rate_limiter_duration_seconds",
			Help:    "Time requests waited for the client-side rate limiter (--kube-api-qps, --kube-api-burst), by verb and host.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"verb", "host"})
		retryBackoff = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snapkeeper_retry_backoff_seconds",
			Help:    "Backoff a key is put off by after its sync failed, by work loop (the time lost to retries).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"loop"})
		reg.MustRegister(latency, results, throttled, retryBackoff)
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     latencyAdapter{latency},
			RateLimiterLatency: latencyAdapter{throttled},
			RequestResult:      resultAdapter{results},
		})
		workqueue.SetProvider(newQueueMetrics(reg))
		leaderelection.SetProvider(newLeaderMetrics(reg))
	})
}

// registerCacheLag exposes the size of a component's cache-lag tracker
// (pkg/cachelag, owned by its Writer) as snapkeeper_cache_lag_entries; reg
// is the component's registerer, which adds the component label.
func registerCacheLag(reg prometheus.Registerer, lag *cachelag.Tracker) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "snapkeeper_cache_lag_entries",
		Help: "Objects whose own write, creation or deletion the component's informer cache does not show yet, writes in flight included.",
	}, func() float64 { return float64(lag.Len()) }))
}

// registerBinderGauges exposes the binder's state gauges (pkg/sync/binder/gauges.go,
// docs/metrics.md) on the binder component's registerer.
func registerBinderGauges(reg prometheus.Registerer, b *binder.Controller) error {
	g, err := binder.NewGauges(b, binder.GaugeOptions{})
	if err != nil {
		return err
	}
	return reg.Register(g)
}

// leaderMetrics implements leaderelection.MetricsProvider with the series
// Kubernetes components (and the community snapshot controllers) expose:
// leader_election_master_status{name} is 1 while this process leads the
// Lease name, 0 after it lost it.
type leaderMetrics struct {
	status   *prometheus.GaugeVec
	slowpath *prometheus.CounterVec
}

func newLeaderMetrics(reg prometheus.Registerer) *leaderMetrics {
	m := &leaderMetrics{
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leader_election_master_status",
			Help: "1 while this process is the leader of the Lease name, else 0."}, []string{"name"}),
		slowpath: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leader_election_slowpath_total",
			Help: "Lease renewals that took the slow path (a full update)."}, []string{"name"}),
	}
	reg.MustRegister(m.status, m.slowpath)
	return m
}

func (m *leaderMetrics) NewLeaderMetric() leaderelection.LeaderMetric { return m }
func (m *leaderMetrics) On(name string)                               { m.status.WithLabelValues(name).Set(1) }
func (m *leaderMetrics) Off(name string)                              { m.status.WithLabelValues(name).Set(0) }
func (m *leaderMetrics) SlowpathExercised(name string)                { m.slowpath.WithLabelValues(name).Inc() }

type latencyAdapter struct{ h *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	a.h.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type resultAdapter struct{ c *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}

// queueMetrics implements workqueue.MetricsProvider on Prometheus.
type queueMetrics struct {
	depth               *prometheus.GaugeVec
	addsC, retriesC     *prometheus.CounterVec
	latency, work       *prometheus.HistogramVec
	unfinished, longest *prometheus.GaugeVec
}

func newQueueMetrics(reg prometheus.Registerer) *queueMetrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 10)
	m := &queueMetrics{
		depth:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the workqueue."}, []string{"name"}),
		addsC:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Adds handled by the workqueue."}, []string{"name"}),
		retriesC:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Retries handled by the workqueue."}, []string{"name"}),
		latency:    prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "Time an item waits in the queue.", Buckets: buckets}, []string{"name"}),
		work:       prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "Time processing an item takes.", Buckets: buckets}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress."}, []string{"name"}),
		longest:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "Longest running processor."}, []string{"name"}),
	}
	reg.MustRegister(m.depth, m.addsC, m.retriesC, m.latency, m.work, m.unfinished, m.longest)
	return m
}

func (m *queueMetrics) NewDepthMetric(n string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(n)
}
func (m *queueMetrics) NewAddsMetric(n string) workqueue.CounterMetric {
	return m.addsC.WithLabelValues(n)
}
func (m *queueMetrics) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(n)
}
func (m *queueMetrics) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return m.work.WithLabelValues(n)
}
func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(n)
}
func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(n)
}
func (m *queueMetrics) NewRetriesMetric(n string) workqueue.CounterMetric {
	return m.retriesC.WithLabelValues(n)
}
