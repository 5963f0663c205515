package csi

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// The metric users of the community sidecars already scrape
// (docs/contract.md, "Metrics users already scrape"; docs/metrics.md): name, labels,
// buckets and the unknown-driver label value are kept identical.
const (
	metricSubsystem    = "csi_sidecar"
	metricName         = "operations_seconds"
	unknownDriverLabel = "unknown-driver"
)

var metricBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

// callObserver times every CSI call, records csi_sidecar_operations_seconds
// and logs the call without its request (which may hold secrets).
type callObserver struct {
	hist   *prometheus.HistogramVec // nil: metrics disabled
	driver atomic.Pointer[string]
}

func newCallObserver(reg prometheus.Registerer) (*callObserver, error) {
	o := &callObserver{}
	unknown := unknownDriverLabel
	o.driver.Store(&unknown)
	if reg == nil {
		return o, nil
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: metricSubsystem,
		Name:      metricName,
		Help:      "Container Storage Interface operation duration with gRPC error code status total",
		Buckets:   metricBuckets,
	}, []string{"driver_name", "method_name", "grpc_status_code"})
	if err := reg.Register(h); err != nil {
		// Several clients (a reconnecting sidecar, tests) may share one
		// registry: share the histogram too.
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("registering %s_%s: %w", metricSubsystem, metricName, err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.HistogramVec)
		if !ok {
			return nil, fmt.Errorf("registering %s_%s: a different collector holds the name", metricSubsystem, metricName)
		}
		h = existing
	}
	o.hist = h
	return o, nil
}

// setDriver sets the driver_name label once GetPluginInfo answered.
func (o *callObserver) setDriver(name string) { o.driver.Store(&name) }

// unary is the client interceptor. method is the full gRPC method name, e.g.
// "/csi.v1.Controller/CreateSnapshot", the community's method_name value.
func (o *callObserver) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	d := time.Since(start)
	code := Code(err)
	if o.hist != nil {
		o.hist.WithLabelValues(*o.driver.Load(), method, code.String()).Observe(d.Seconds())
	}
	klog.FromContext(ctx).V(5).Info("CSI call", "method", method, "code", code.String(), "duration", d)
	return err
}
