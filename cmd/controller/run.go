package main

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/kubeclient"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/version"
)

// Lease names shared with the community components, so that theirs and ours
// exclude each other during a rolling image swap.
const (
	BinderLease = "snapshot-controller-leader"
)

// CSILeaseName is the Lease of the CSI side of a driver.
func CSILeaseName(driver string) string { return snapshot.CSILeaseName(driver) }

// clients are the API clients of one component; each component gets its own
// so that one's client-side rate limit does not slow the other.
type clients struct {
	kube kubernetes.Interface
	snap snapclient.Interface
	// config is the component's client configuration (JSON), for
	// clients of other APIs (snapkeeper.io).
	config *rest.Config
	// watchKube and watchSnap serve the informers (their lists and
	// watches) over a connection of their own (kubeclient.OwnConnection).
	watchKube kubernetes.Interface
	watchSnap snapclient.Interface
}

// restConfig is the client configuration both components start from.
func (o *Options) restConfig() (*rest.Config, error) {
	cfg, err := o.Client.RESTConfig("snapkeeper/" + version.Version)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	return cfg, nil
}

func newClients(base *rest.Config, component string) (*clients, error) {
	cfg := rest.CopyConfig(base)
	cfg.UserAgent += " (" + component + ")"
	// Built-in kinds (claims, volumes, events) speak protobuf: cheaper for
	// the API server than JSON. Custom resources only speak JSON.
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kubeCfg.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return nil, err
	}
	snap, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl := &clients{kube: kube, snap: snap, config: cfg}
	// The informers' own connection: on the connection of 64 workers'
	// requests, their watch events reached the binder seconds after the
	// answers to its writes under a busy API server, and every sync in
	// between read a stale cache (docs/scale.md, "The watch's own
	// connection").
	if cl.watchKube, cl.watchSnap, err = kubeclient.OwnConnection(kubeCfg, cfg); err != nil {
		return nil, err
	}
	return cl, nil
}

// eventScheme knows core and snapshot kinds, so events name their object.
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = snapscheme.AddToScheme(s)
	return s
}

func newRecorder(ctx context.Context, kube kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(eventScheme(), corev1.EventSource{Component: component})
}

// run starts the enabled components and blocks until ctx is done or one of
// them fails.
func run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting snapkeeper controller", "version", version.Version, "revision", version.GetRevision(), "components", o.Components, "because", o.ComponentsReason)
	if o.Automaxprocs {
		// The Go runtime sets GOMAXPROCS from the cgroup CPU limit (and
		// follows changes of it), which is what the community flag does.
		logger.Info("GOMAXPROCS follows the container's CPU limit", "GOMAXPROCS", goruntime.GOMAXPROCS(0))
	}
	base, err := o.restConfig()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.NewCollector())
	registerClientMetrics(reg)
	h := &health{}
	if o.HTTPEndpoint != "" {
		if err := serveHTTP(ctx, o.HTTPEndpoint, o.MetricsPath, o.EnablePprof, h, reg); err != nil {
			return fmt.Errorf("http endpoint %s: %w", o.HTTPEndpoint, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 4)
	started := 0
	watching := false
	// Each component has its own clients (its own rate limits; the user
	// agent names the component), waits for the CRDs on its own and runs until ctx ends.
	components := []struct {
		name string
		run  func(context.Context, *clients, *prometheus.Registry, *health, bool) error
	}{
		{ComponentBinder, o.runBinder},
		{ComponentCSI, o.runCSI},
		{ComponentSchedules, o.runSchedules},
	}
	for _, comp := range components {
		if !o.Enabled(comp.name) {
			continue
		}
		cl, err := newClients(base, comp.name)
		if err != nil {
			return err
		}
		served, err := waitForCRDs(ctx, cl.kube.Discovery(), o.RetryCRDIntervalMax, o.CRDWaitTimeout)
		if err != nil {
			return err
		}
		groups := o.groupsOn(ctx, served)
		if o.GroupSnapshots() && !served && o.GroupCRDCheckInterval > 0 && !watching {
			watching = true
			dc := cl.kube.Discovery()
			go func() { errc <- watchGroupCRDs(ctx, dc, o.GroupCRDCheckInterval) }()
			started++
		}
		run := comp.run
		go func() { errc <- run(ctx, cl, reg, h, groups) }()
		started++
	}
	return awaitComponents(ctx, cancel, errc, started, componentStopWait)
}

// componentStopWait bounds the wait for the components to stop, within the
// chart's 30 s terminationGracePeriodSeconds.
const componentStopWait = 20 * time.Second

// awaitComponents blocks until ctx ends (SIGTERM) or a component fails,
// then stops the others (cancel) and waits, at most wait, for every one of
// the n started to return: a component returns once its work has stopped
// and its Lease is released, so the replica waiting for the Lease takes
// over at once instead of after the lease duration. It returns the error
// of the component that failed first; after SIGTERM, what the components
// return on the way out is only logged.
func awaitComponents(ctx context.Context, cancel context.CancelFunc, errc <-chan error, n int, wait time.Duration) error {
	logger := klog.FromContext(ctx)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		n--
	}
	cancel()
	deadline := time.After(wait)
	for ; n > 0; n-- {
		select {
		case e := <-errc:
			if e != nil {
				logger.Info("Component stopped with an error", "err", e.Error())
			}
		case <-deadline:
			logger.Info("Exiting while components still stop: their Leases expire instead of being released", "components", n, "waited", wait)
			return err
		}
	}
	return err
}

func (o *Options) leaseNamespace() string {
	if o.LeaderElectionNamespace != "" {
		return o.LeaderElectionNamespace
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "kube-system"
}

// untilDone adapts a blocking run function to leader election.
func untilDone(run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}
