// Package controller holds the options and the wiring of the snapkeeper
// controller binary: the cluster-wide binder, the per-driver CSI side, or
// both in one process.
package controller

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Component names for --components.
const (
	ComponentBinder = "binder"
	ComponentCSI    = "csi"
)

// Options is every flag of the controller. It accepts the command lines of
// the community snapshot-controller and csi-snapshotter, so a deployment can
// swap the image and keep its arguments.
type Options struct {
	Components string

	Kubeconfig   string
	KubeAPIQPS   float64
	KubeAPIBurst int
	Workers      int
	RetryStart   time.Duration
	RetryMax     time.Duration
	ResyncPeriod time.Duration
	Recheck      time.Duration

	LeaderElection              bool
	LeaderElectionNamespace     string
	LeaderElectionLeaseDuration time.Duration
	LeaderElectionRenewDeadline time.Duration
	LeaderElectionRetryPeriod   time.Duration
	LeaderElectionLabels        string

	HTTPEndpoint   string
	MetricsAddress string
	MetricsPath    string
	FeatureGates   string
	LoggingFormat  string
	ShowVersion    bool

	// Binder.
	DistributedSnapshotting     bool
	PreventVolumeModeConversion bool
	SourceVolumeMode            bool
	RetryCRDIntervalMax         time.Duration
	CRDWaitTimeout              time.Duration

	// CSI side.
	CSIAddress                  string
	Timeout                     time.Duration
	ExtraCreateMetadata         bool
	SnapshotNamePrefix          string
	SnapshotNameUUIDLength      int
	GroupSnapshotNamePrefix     string
	GroupSnapshotNameUUIDLength int
	NodeDeployment              bool
	NodeName                    string
}

// NewOptions returns the defaults. Client limits are far above the
// community's QPS 5 / burst 10: the controller reads only from informers and
// writes only what changed (about 5 binder writes and 2 CSI-side writes per
// snapshot), so its request rate is its useful work, and the API server's
// priority-and-fairness is the real guard of the server. At QPS 5, a burst
// of 500 snapshots waits minutes on the client side alone.
func NewOptions() *Options {
	return &Options{
		KubeAPIQPS:                  1000,
		KubeAPIBurst:                2000,
		Workers:                     64,
		RetryStart:                  50 * time.Millisecond,
		RetryMax:                    5 * time.Minute,
		Recheck:                     5 * time.Minute,
		LeaderElectionLeaseDuration: 15 * time.Second,
		LeaderElectionRenewDeadline: 10 * time.Second,
		LeaderElectionRetryPeriod:   5 * time.Second,
		MetricsPath:                 "/metrics",
		LoggingFormat:               "text",
		PreventVolumeModeConversion: true,
		SourceVolumeMode:            true,
		RetryCRDIntervalMax:         5 * time.Second,
		CRDWaitTimeout:              2 * time.Minute,
		Timeout:                     time.Minute,
		SnapshotNamePrefix:          "snapshot",
		SnapshotNameUUIDLength:      -1,
		GroupSnapshotNamePrefix:     "groupsnapshot",
		GroupSnapshotNameUUIDLength: -1,
	}
}

// AddFlags registers every flag on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Components, "components", "", "Comma-separated components to run: binder, csi. Default: binder without --csi-address, csi with it.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster configuration when empty.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client QPS towards the API server, per component.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client burst towards the API server, per component.")
	fs.IntVar(&o.Workers, "worker-threads", o.Workers, "Workers per component.")
	fs.DurationVar(&o.RetryStart, "retry-interval-start", o.RetryStart, "First retry delay of a failed object; doubles on each failure.")
	fs.DurationVar(&o.RetryMax, "retry-interval-max", o.RetryMax, "Longest retry delay of a failed object.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "Informer resync period; 0 (default) disables it: the controller is driven by watch events.")
	fs.DurationVar(&o.Recheck, "safety-recheck-period", o.Recheck, "Jittered re-check of objects that wait for something, in case an event was missed.")
	fs.BoolVar(&o.LeaderElection, "leader-election", false, "Elect a leader through a Lease before working.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the Lease; default: the pod's namespace, else kube-system.")
	fs.DurationVar(&o.LeaderElectionLeaseDuration, "leader-election-lease-duration", o.LeaderElectionLeaseDuration, "Lease duration.")
	fs.DurationVar(&o.LeaderElectionRenewDeadline, "leader-election-renew-deadline", o.LeaderElectionRenewDeadline, "Renew deadline of the leader.")
	fs.DurationVar(&o.LeaderElectionRetryPeriod, "leader-election-retry-period", o.LeaderElectionRetryPeriod, "Retry period of candidates.")
	fs.StringVar(&o.LeaderElectionLabels, "leader-election-labels", "", "Labels for the Lease, as k1=v1,k2=v2.")
	fs.StringVar(&o.HTTPEndpoint, "http-endpoint", "", "host:port of /healthz, /readyz, /healthz/leader-election and metrics; empty disables.")
	fs.StringVar(&o.MetricsAddress, "metrics-address", "", "Deprecated alias of --http-endpoint.")
	fs.StringVar(&o.MetricsPath, "metrics-path", o.MetricsPath, "Path of the Prometheus metrics.")
	fs.StringVar(&o.FeatureGates, "feature-gates", "", "Accepted for compatibility (key=bool,...); group snapshots follow the presence of their CRDs.")
	fs.StringVar(&o.LoggingFormat, "logging-format", o.LoggingFormat, "Log format: text or json.")
	fs.BoolVar(&o.ShowVersion, "version", false, "Print the version and exit.")

	fs.BoolVar(&o.DistributedSnapshotting, "enable-distributed-snapshotting", false, "Label each content with the node of its volume, for per-node CSI sides.")
	fs.BoolVar(&o.PreventVolumeModeConversion, "prevent-volume-mode-conversion", o.PreventVolumeModeConversion, "Accepted for compatibility; the webhook enforces volume mode on restores.")
	fs.BoolVar(&o.SourceVolumeMode, "set-source-volume-mode", o.SourceVolumeMode, "Record the source volume's mode on dynamic contents.")
	fs.DurationVar(&o.RetryCRDIntervalMax, "retry-crd-interval-max", o.RetryCRDIntervalMax, "Longest wait between checks for the snapshot CRDs at start-up.")
	fs.DurationVar(&o.CRDWaitTimeout, "crd-wait-timeout", o.CRDWaitTimeout, "Give up (exit) when the snapshot CRDs are not served within this time.")

	fs.StringVar(&o.CSIAddress, "csi-address", "", "Unix socket of the CSI driver; enables the CSI side.")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "Timeout of each CSI call.")
	fs.BoolVar(&o.ExtraCreateMetadata, "extra-create-metadata", false, "Pass snapshot name, namespace and content name to CreateSnapshot as parameters.")
	fs.StringVar(&o.SnapshotNamePrefix, "snapshot-name-prefix", o.SnapshotNamePrefix, "Prefix of CSI snapshot names.")
	fs.IntVar(&o.SnapshotNameUUIDLength, "snapshot-name-uuid-length", o.SnapshotNameUUIDLength, "Cut the UID in CSI snapshot names to this length (dashes removed); -1 keeps it whole.")
	fs.StringVar(&o.GroupSnapshotNamePrefix, "groupsnapshot-name-prefix", o.GroupSnapshotNamePrefix, "Prefix of CSI group snapshot names.")
	fs.IntVar(&o.GroupSnapshotNameUUIDLength, "groupsnapshot-name-uuid-length", o.GroupSnapshotNameUUIDLength, "Cut the UID in CSI group snapshot names to this length; -1 keeps it whole.")
	fs.BoolVar(&o.NodeDeployment, "node-deployment", false, "Handle only contents labelled for this node (NODE_NAME); no leader election.")
}

// Enabled reports whether component c runs.
func (o *Options) Enabled(c string) bool {
	return slices.Contains(strings.Split(o.Components, ","), c)
}

// Complete fills in derived values; lookupEnv reads the environment.
func (o *Options) Complete(lookupEnv func(string) string) {
	if o.Components == "" {
		o.Components = ComponentBinder
		if o.CSIAddress != "" {
			o.Components = ComponentCSI
		}
	}
	if o.HTTPEndpoint == "" {
		o.HTTPEndpoint = o.MetricsAddress
	}
	if o.NodeDeployment {
		o.NodeName = lookupEnv("NODE_NAME")
	}
	o.CSIAddress = strings.TrimPrefix(o.CSIAddress, "unix://")
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	for _, c := range strings.Split(o.Components, ",") {
		if c != ComponentBinder && c != ComponentCSI {
			errs = append(errs, fmt.Errorf("--components: unknown component %q (want binder, csi or binder,csi)", c))
		}
	}
	if o.Enabled(ComponentCSI) && o.CSIAddress == "" {
		errs = append(errs, errors.New("--csi-address is required to run the csi component"))
	}
	if o.NodeDeployment && o.NodeName == "" {
		errs = append(errs, errors.New("--node-deployment needs the NODE_NAME environment variable"))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.Workers <= 0 {
		errs = append(errs, errors.New("--worker-threads must be positive"))
	}
	if o.RetryStart <= 0 || o.RetryMax < o.RetryStart {
		errs = append(errs, errors.New("--retry-interval-start must be positive and at most --retry-interval-max"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, errors.New("--timeout must be positive"))
	}
	if o.LoggingFormat != "text" && o.LoggingFormat != "json" {
		errs = append(errs, fmt.Errorf("--logging-format: %q is neither text nor json", o.LoggingFormat))
	}
	if o.SnapshotNamePrefix == "" {
		errs = append(errs, errors.New("--snapshot-name-prefix must not be empty"))
	}
	return errors.Join(errs...)
}
