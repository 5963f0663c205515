package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/snapkeeper/snapkeeper/pkg/kubeclient"
	"github.com/snapkeeper/snapkeeper/pkg/logging"
)

// Component names for --components.
const (
	ComponentBinder    = "binder"
	ComponentCSI       = "csi"
	ComponentSchedules = "schedules"
)

// DefaultCSIAddress is the community csi-snapshotter's default --csi-address.
const DefaultCSIAddress = "/run/csi/socket"

// csiOnlyFlags are the flags only the community csi-snapshotter has, and
// that mean nothing to the binder: a command line with any of them is a
// csi-snapshotter's, so without --components it runs the CSI side (on
// DefaultCSIAddress when --csi-address is not given, as the sidecar would).
var csiOnlyFlags = []string{"csi-address", "timeout", "snapshot-name-prefix", "snapshot-name-uuid-length",
	"extra-create-metadata", "node-deployment", "groupsnapshot-name-prefix", "groupsnapshot-name-uuid-length"}

// statPath is os.Stat; tests replace it.
var statPath = os.Stat

// Options is every flag of the controller. It accepts the command lines of
// the community snapshot-controller and csi-snapshotter, so a deployment can
// swap the image and keep its arguments.
type Options struct {
	Components string
	// ComponentsReason says how Components was chosen (for the start log).
	ComponentsReason string

	// Client is --kubeconfig, --master, --kube-api-qps and --kube-api-burst.
	Client       kubeclient.Options
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
	LeaderElectionLabels        Labels
	ForceDespiteForeignLeader   bool

	HTTPEndpoint   string
	MetricsAddress string
	MetricsPath    string
	EnablePprof    bool
	FeatureGates   string
	// Logging is --logging-format; with it come -v and the other logging
	// flags of pkg/logging.
	Logging      logging.Options
	ShowVersion  bool
	Automaxprocs OptionalBool

	// Binder.
	DistributedSnapshotting     bool
	PreventVolumeModeConversion bool
	SourceVolumeMode            bool
	RetryCRDIntervalMax         time.Duration
	CRDWaitTimeout              time.Duration
	GroupCRDCheckInterval       time.Duration
	NoCSISideAfter              time.Duration

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
		Client:                      kubeclient.Options{QPS: 1000, Burst: 2000},
		Workers:                     64,
		RetryStart:                  50 * time.Millisecond,
		RetryMax:                    5 * time.Minute,
		Recheck:                     5 * time.Minute,
		LeaderElectionLeaseDuration: 15 * time.Second,
		LeaderElectionRenewDeadline: 10 * time.Second,
		LeaderElectionRetryPeriod:   5 * time.Second,
		MetricsPath:                 "/metrics",
		Logging:                     logging.NewOptions(),
		PreventVolumeModeConversion: true,
		SourceVolumeMode:            true,
		RetryCRDIntervalMax:         5 * time.Second,
		CRDWaitTimeout:              2 * time.Minute,
		GroupCRDCheckInterval:       time.Minute,
		NoCSISideAfter:              time.Minute,
		Timeout:                     time.Minute,
		SnapshotNamePrefix:          "snapshot",
		SnapshotNameUUIDLength:      -1,
		GroupSnapshotNamePrefix:     "groupsnapshot",
		GroupSnapshotNameUUIDLength: -1,
	}
}

// AddFlags registers every flag on fs, the logging flags included.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Components, "components", "", "Comma-separated components to run: binder, csi, schedules (SnapshotSchedules: docs/schedules.md). Default: csi when --csi-address or another csi-snapshotter-only flag "+
		"(--timeout, --snapshot-name-prefix, --snapshot-name-uuid-length, --extra-create-metadata, --node-deployment, --groupsnapshot-name-*) is given, "+
		"or when "+filepath.Dir(DefaultCSIAddress)+" exists (a CSI socket volume); binder otherwise.")
	o.Client.AddFlags(fs, "per component")
	o.Client.AddMasterFlag(fs)
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
	fs.Var(&o.LeaderElectionLabels, "leader-election-labels", "Labels for the Lease while this process holds it, as k1=v1,k2=v2 or k1:v1,k2:v2 (the community form); repeatable.")
	fs.BoolVar(&o.ForceDespiteForeignLeader, "force-despite-foreign-leader", false, "Without --leader-election, start even when a controller that is not snapkeeper holds a fresh Lease of ours (two controllers then act on the same objects).")
	fs.StringVar(&o.HTTPEndpoint, "http-endpoint", "", "host:port of /healthz, /readyz, /healthz/leader-election and metrics; empty disables.")
	fs.StringVar(&o.MetricsAddress, "metrics-address", "", "Deprecated alias of --http-endpoint.")
	fs.StringVar(&o.MetricsPath, "metrics-path", o.MetricsPath, "Path of the Prometheus metrics.")
	fs.BoolVar(&o.EnablePprof, "enable-pprof", false, "Serve Go's profiles (/debug/pprof/) on --http-endpoint: CPU, heap, goroutines. Off by default: a profile costs CPU and shows internals.")
	fs.StringVar(&o.FeatureGates, "feature-gates", "", "Feature gates, key=bool,...: CSIVolumeGroupSnapshot (GA, default true) serves volume group snapshots when their CRDs are served, =false turns them off; ReleaseLeaderElectionOnExit is accepted.")
	o.Logging.AddFlags(fs)
	fs.BoolVar(&o.ShowVersion, "version", false, "Print the version and exit.")
	fs.Var(&o.Automaxprocs, "automaxprocs", "Set GOMAXPROCS from the container's CPU quota. Accepted for compatibility: the Go runtime already does so (and follows later limit changes), with or without this flag.")

	fs.BoolVar(&o.DistributedSnapshotting, "enable-distributed-snapshotting", false, "Label each content with the node of its volume, for per-node CSI sides.")
	fs.BoolVar(&o.PreventVolumeModeConversion, "prevent-volume-mode-conversion", o.PreventVolumeModeConversion, "Record the source volume's mode in spec.sourceVolumeMode of dynamic contents, so restores cannot change it unless allowed; false leaves it unset (as the community controller does).")
	fs.BoolVar(&o.SourceVolumeMode, "set-source-volume-mode", o.SourceVolumeMode, "Record the source volume's mode on dynamic contents (needs --prevent-volume-mode-conversion, default true).")
	fs.DurationVar(&o.RetryCRDIntervalMax, "retry-crd-interval-max", o.RetryCRDIntervalMax, "Longest wait between checks for the snapshot CRDs at start-up.")
	fs.DurationVar(&o.CRDWaitTimeout, "crd-wait-timeout", o.CRDWaitTimeout, "Give up (exit) when the snapshot CRDs are not served within this time.")
	fs.DurationVar(&o.GroupCRDCheckInterval, "group-crd-check-interval", o.GroupCRDCheckInterval, "With group snapshots on (the default; --feature-gates=CSIVolumeGroupSnapshot=false turns them off) but their CRDs not served at start-up, check this often and exit once they are, so the restart serves them; 0 never checks.")
	fs.DurationVar(&o.NoCSISideAfter, "no-csi-side-after", o.NoCSISideAfter, "Report on a VolumeSnapshot (status error and event) that no CSI side runs for its driver when its content waits this long and no CSI side Lease of the driver is fresh; 0 turns the report off.")

	fs.StringVar(&o.CSIAddress, "csi-address", "", "Unix socket of the CSI driver (unix:// optional); enables the CSI side. Default with the CSI side: "+DefaultCSIAddress+".")
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

// Complete fills in derived values from the parsed flag set fs (which flags
// were given) and the environment (lookupEnv).
//
// Without --components the command line says which community component it
// was written for: --csi-address or a flag only the csi-snapshotter has
// makes it the CSI side, and so does the directory of the csi-snapshotter's
// default socket (the volume a driver chart mounts there) when the sidecar
// relied on that default. Anything else is the binder. A csi-snapshotter
// whose image is swapped for ours must never become a second binder.
func (o *Options) Complete(fs *flag.FlagSet, lookupEnv func(string) string) {
	if o.Components == "" {
		o.Components, o.ComponentsReason = o.deriveComponents(fs)
	} else {
		o.ComponentsReason = "--components"
	}
	if o.Enabled(ComponentCSI) && o.CSIAddress == "" {
		o.CSIAddress = DefaultCSIAddress
	}
	if o.HTTPEndpoint == "" {
		o.HTTPEndpoint = o.MetricsAddress
	}
	if o.NodeDeployment {
		o.NodeName = lookupEnv("NODE_NAME")
	}
	o.CSIAddress = strings.TrimPrefix(o.CSIAddress, "unix://")
}

func (o *Options) deriveComponents(fs *flag.FlagSet) (components, reason string) {
	given := map[string]bool{}
	if fs != nil {
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	}
	for _, name := range csiOnlyFlags {
		if given[name] {
			return ComponentCSI, "--" + name + " is a csi-snapshotter flag"
		}
	}
	if _, err := statPath(DefaultCSIAddress); err == nil {
		return ComponentCSI, DefaultCSIAddress + " exists (the csi-snapshotter's default socket)"
	}
	if fi, err := statPath(filepath.Dir(DefaultCSIAddress)); err == nil && fi.IsDir() {
		return ComponentCSI, filepath.Dir(DefaultCSIAddress) + " exists (the volume of the csi-snapshotter's default socket)"
	}
	return ComponentBinder, "no csi-snapshotter flag and no " + filepath.Dir(DefaultCSIAddress)
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	for _, c := range strings.Split(o.Components, ",") {
		if c != ComponentBinder && c != ComponentCSI && c != ComponentSchedules {
			errs = append(errs, fmt.Errorf("--components: unknown component %q (want binder, csi, schedules or a comma-separated list of them, such as binder,schedules)", c))
		}
	}
	for k, v := range o.LeaderElectionLabels.Map() {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("--leader-election-labels: key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("--leader-election-labels: value %q of %s: %s", v, k, msg))
		}
	}
	if o.NodeDeployment && o.NodeName == "" {
		errs = append(errs, errors.New("--node-deployment needs the NODE_NAME environment variable"))
	}
	if err := o.Client.Validate(); err != nil {
		errs = append(errs, err)
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
	if o.GroupCRDCheckInterval < 0 {
		errs = append(errs, errors.New("--group-crd-check-interval must not be negative (0 never checks)"))
	}
	if err := o.Logging.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.SnapshotNamePrefix == "" {
		errs = append(errs, errors.New("--snapshot-name-prefix must not be empty"))
	}
	if _, err := parseFeatureGates(o.FeatureGates); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
