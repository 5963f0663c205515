package admission

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/snapkeeper/snapkeeper/pkg/conversion"
)

// Verdicts, as counted.
const (
	verdictAllowed = "allowed"
	verdictDenied  = "denied"
	verdictError   = "error"
)

// Metrics are the webhook's Prometheus series. The label values are
// bounded (known resources and operations, else "other") because the
// request body is untrusted input.
type Metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	certReloads *prometheus.CounterVec
	certExpiry  prometheus.Gauge
	conversions *prometheus.CounterVec
}

// NewMetrics registers the webhook's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snapkeeper_webhook_requests_total",
			Help: "Admission requests by resource, operation and verdict (allowed, denied, error).",
		}, []string{"resource", "operation", "verdict"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snapkeeper_webhook_request_duration_seconds",
			Help:    "Time to answer an admission request, from the first byte read to the answer written.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"resource"}),
		certReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snapkeeper_webhook_certificate_reloads_total",
			Help: "Attempts to load a changed serving certificate, by result (success, error).",
		}, []string{"result"}),
		certExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "snapkeeper_webhook_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the serving certificate in use, as a Unix time.",
		}),
		conversions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snapkeeper_webhook_conversions_total",
			Help: "Group snapshot objects converted by /convert, by kind, source and target version, and result (success, error).",
		}, []string{"kind", "from", "to", "result"}),
	}
	reg.MustRegister(m.requests, m.latency, m.certReloads, m.certExpiry, m.conversions)
	return m
}

type outcome struct{ resource, operation, verdict string }

func (m *Metrics) observe(o outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(o.resource, o.operation, o.verdict).Inc()
	m.latency.WithLabelValues(o.resource).Observe(d.Seconds())
}

func (m *Metrics) certLoaded(err error, notAfter time.Time) {
	if m == nil {
		return
	}
	if err != nil {
		m.certReloads.WithLabelValues("error").Inc()
		return
	}
	m.certReloads.WithLabelValues("success").Inc()
	m.certExpiry.Set(float64(notAfter.Unix()))
}

func resourceLabel(r string) string {
	if r == "" {
		return "unknown"
	}
	if _, ok := resources[r]; ok {
		return r
	}
	return "other"
}

func operationLabel(op admissionv1.Operation) string {
	switch op {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return string(op)
	}
	return "other"
}

func verdictOf(resp *admissionv1.AdmissionResponse) string {
	switch {
	case resp.Allowed:
		return verdictAllowed
	case resp.Result != nil && resp.Result.Code == 403:
		return verdictDenied
	}
	return verdictError
}

// converted counts one object of a conversion review. Labels outside the
// known kinds and versions are "other": the review is untrusted input.
func (m *Metrics) converted(obj map[string]any, to string, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	kind, _ := obj["kind"].(string)
	from, _ := obj["apiVersion"].(string)
	m.conversions.WithLabelValues(known(kind, conversion.KindGroupSnapshot, conversion.KindGroupSnapshotContent, conversion.KindGroupSnapshotClass),
		versionLabel(from), versionLabel(to), result).Inc()
}

func versionLabel(apiVersion string) string {
	_, v, _ := strings.Cut(apiVersion, "/")
	if !strings.HasPrefix(apiVersion, conversion.Group+"/") {
		return "other"
	}
	return known(v, conversion.V1beta1, conversion.V1beta2, conversion.V1)
}

func known(v string, values ...string) string {
	if slices.Contains(values, v) {
		return v
	}
	return "other"
}
