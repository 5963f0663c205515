// Command mockcsi serves the Kubernetes e2e mock CSI driver
// (k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service) as
// Identity, Controller and Node services on a unix socket, plus a
// GroupController service of its own (groups.go: volume group snapshots
// whose members live in the mock's snapshot store), for snapkeeper's tests
// and benchmarks. Build: cd hack/tools/kube && go build -o ../../../bin/mock-csi-driver ./mockcsi
//
// A gRPC interceptor in front of the mock
//   - serializes every call into it: the mock is not safe under concurrent
//     calls (DeleteSnapshot looks up an index and removes it in two steps);
//   - injects faults (latency, error codes, "not ready for the first N
//     polls", a CreateSnapshot that hangs after the snapshot was cut), set by
//     --faults, --faults-file (re-read when it changes) or PUT /faults;
//   - counts calls by method and result code (GET /calls) and logs each call
//     with its snapshot, secret keys (never values) and parameters
//     (GET /calllog);
//   - can make answers report a size (for all snapshots, or per source
//     volume: --volume-sizes, PUT /volume-sizes), or no creation time and
//     size;
//   - refuses a DeleteSnapshot of a member of a live group snapshot
//     (FailedPrecondition).
//
// The mock starts with three built-in snapshots, "Mock Snapshot 1..3" with
// ids "1", "2", "3". Test code must count only the snapshots it created
// (GET /snapshots marks the built-in ones with "builtin": true).
//
// Everything the mock knows lives in memory: a restarted driver has lost
// every snapshot and group snapshot created before.
//
// To run as a pod on a real kubelet (README.md, "Running as a pod"):
// --data-dir keeps each volume's files in a directory that NodePublishVolume
// bind-mounts into the pod, and that CreateSnapshot copies and a restoring
// CreateVolume copies back (data.go); --plugin-registration-dir registers
// the driver with the kubelet, as node-driver-registrar would
// (registration.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
)

// DefaultDriverName is the driver name GetPluginInfo reports by default.
const DefaultDriverName = "mock.csi.snapkeeper.io"

// Options are the command-line options.
type Options struct {
	CSIAddress   string
	DriverName   string
	HTTPAddress  string
	ReadyFile    string
	Faults       string
	FaultsFile   string
	PollInterval time.Duration
	Latency      time.Duration
	NotReady     int
	ReadyAfter   time.Duration
	ReadyMax     time.Duration
	SizeBytes    int64
	NoCreation   bool
	GracePeriod  time.Duration
	HideCaps     string
	VolumeSizes  string
	NoGroups     bool
	// AllowMemberDelete lets DeleteSnapshot delete a member of a group.
	AllowMemberDelete bool

	DataDir                 string
	NodeID                  string
	DisableAttach           bool
	KubeletRegistrationPath string
	PluginRegistrationDir   string
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.CSIAddress, "csi-address", "", "Unix socket path to serve CSI on (a unix:// prefix is accepted). Required.")
	fs.StringVar(&o.DriverName, "name", DefaultDriverName, "Driver name reported by GetPluginInfo.")
	fs.StringVar(&o.HTTPAddress, "http-address", "", "host:port of the HTTP API (GET /calls, GET /calllog, GET|PUT /faults, GET /snapshots, GET /groups, GET|PUT|PATCH /volume-sizes, GET /data); empty disables it. Port 0 picks a free port (see --ready-file).")
	fs.StringVar(&o.ReadyFile, "ready-file", "", "Once serving, write {\"csiAddress\",\"httpAddress\",\"pid\"} JSON to this file (atomically); removed at exit.")
	fs.StringVar(&o.Faults, "faults", "", "Initial faults as inline JSON ({\"rules\":[...]}).")
	fs.StringVar(&o.FaultsFile, "faults-file", "", "JSON faults file, re-read whenever its content changes; a removed file means no faults. Overrides --faults once it exists.")
	fs.DurationVar(&o.PollInterval, "faults-poll-interval", 100*time.Millisecond, "How often --faults-file is checked for changes.")
	fs.DurationVar(&o.Latency, "latency", 0, "Shorthand: add this latency to every call.")
	fs.IntVar(&o.NotReady, "not-ready", 0, "Shorthand: each snapshot reports readyToUse=false in its first N CreateSnapshot/ListSnapshots(id) responses.")
	fs.DurationVar(&o.ReadyAfter, "ready-after", 0, "Shorthand: each snapshot (group) reports readyToUse=false until this long after the first answer about it.")
	fs.DurationVar(&o.ReadyMax, "ready-after-max", 0, "With --ready-after: each snapshot waits a time spread between --ready-after and this.")
	fs.Int64Var(&o.SizeBytes, "snapshot-size", 0, "Shorthand: CreateSnapshot and ListSnapshots answers report this size in bytes (the mock itself says 0, unknown).")
	fs.BoolVar(&o.NoCreation, "no-creation-time", false, "Shorthand: CreateSnapshot and ListSnapshots answers carry no creation time and no size (unless --snapshot-size).")
	fs.StringVar(&o.HideCaps, "hide-capabilities", "", "Comma-separated controller or group controller capabilities to remove from ControllerGetCapabilities / GroupControllerGetCapabilities (e.g. CREATE_DELETE_SNAPSHOT,LIST_SNAPSHOTS,CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT), to play a driver without them.")
	fs.StringVar(&o.VolumeSizes, "volume-sizes", "", "Initial per-volume snapshot sizes, volume-id=bytes,... (e.g. vol-1=1073741824): every answer about a snapshot of such a volume reports this size; others fall back to --snapshot-size. See PUT /volume-sizes.")
	fs.BoolVar(&o.AllowMemberDelete, "allow-member-delete", false, "Let DeleteSnapshot delete a member of a live group snapshot (as the CSI hostpath driver does) instead of failing with FailedPrecondition.")
	fs.BoolVar(&o.NoGroups, "no-group-controller", false, "Do not serve the GroupController service at all (its calls answer Unimplemented), to play a driver without group snapshots.")
	fs.DurationVar(&o.GracePeriod, "grace-period", 5*time.Second, "How long in-flight calls may finish at SIGTERM/SIGINT.")
	fs.StringVar(&o.DataDir, "data-dir", "", "Keep volume and snapshot data in this directory (emptied at start-up): CreateSnapshot copies the volume, CreateVolume from a snapshot or volume copies it back, NodePublishVolume bind-mounts the volume (Linux, root). Empty: no data, the mock only records.")
	fs.StringVar(&o.NodeID, "node-id", "", "Node id in NodeGetInfo answers (the kubelet stores it in CSINode). Empty: the mock's, the driver name.")
	fs.BoolVar(&o.DisableAttach, "disable-attach", false, "Play a driver without ControllerPublishVolume (no PUBLISH_UNPUBLISH_VOLUME; NodeStage/NodePublishVolume need no publish context), for a CSIDriver with attachRequired: false.")
	fs.StringVar(&o.KubeletRegistrationPath, "kubelet-registration-path", "", "With --plugin-registration-dir: the CSI socket path as the kubelet sees it (a host path), returned to the kubelet's plugin watcher.")
	fs.StringVar(&o.PluginRegistrationDir, "plugin-registration-dir", "", "Register with the kubelet, without node-driver-registrar: serve the plugin registration API on DIR/<name>-reg.sock (DIR is the kubelet's plugins_registry directory); removed at exit.")
}

// Validate checks the options and returns the initial faults.
func (o *Options) Validate() (Faults, error) {
	o.CSIAddress = strings.TrimPrefix(strings.TrimPrefix(o.CSIAddress, "unix://"), "unix:")
	if o.CSIAddress == "" {
		return Faults{}, errors.New("--csi-address is required")
	}
	if o.DriverName == "" {
		return Faults{}, errors.New("--name must not be empty")
	}
	if _, err := parseCapabilities(o.HideCaps); err != nil {
		return Faults{}, fmt.Errorf("--hide-capabilities: %w", err)
	}
	if _, err := parseVolumeSizesFlag(o.VolumeSizes); err != nil {
		return Faults{}, fmt.Errorf("--volume-sizes: %w", err)
	}
	if o.PollInterval <= 0 {
		return Faults{}, errors.New("--faults-poll-interval must be positive")
	}
	if err := o.validateNodeOptions(); err != nil {
		return Faults{}, err
	}
	f, err := ParseFaults([]byte(o.Faults))
	if err != nil {
		return Faults{}, fmt.Errorf("--faults: %w", err)
	}
	if o.Latency > 0 {
		f.Rules = append(f.Rules, Rule{Method: "*", Latency: Duration(o.Latency)})
	}
	if o.NotReady > 0 {
		f.Rules = append(f.Rules, Rule{Method: "*", NotReady: o.NotReady})
	}
	if o.ReadyAfter > 0 {
		f.Rules = append(f.Rules, Rule{Method: "*", ReadyAfter: Duration(o.ReadyAfter), ReadyAfterMax: Duration(o.ReadyMax)})
	}
	if o.NoCreation {
		f.Rules = append(f.Rules, Rule{Method: "*", NoCreationTime: true})
	}
	if o.SizeBytes > 0 {
		f.Rules = append(f.Rules, Rule{Method: "*", SizeBytes: o.SizeBytes})
	}
	return f, f.Validate()
}

// validateNodeOptions checks the options of a driver that runs as a pod
// on a real kubelet.
func (o *Options) validateNodeOptions() error {
	if (o.KubeletRegistrationPath == "") != (o.PluginRegistrationDir == "") {
		return errors.New("--kubelet-registration-path and --plugin-registration-dir go together: the kubelet finds the driver in the one and dials the other")
	}
	if o.KubeletRegistrationPath != "" && !filepath.IsAbs(o.KubeletRegistrationPath) {
		return fmt.Errorf("--kubelet-registration-path %q must be an absolute path", o.KubeletRegistrationPath)
	}
	if o.DataDir != "" {
		// Absolute: the kernel resolves bind-mount sources from the
		// driver's working directory otherwise.
		abs, err := filepath.Abs(o.DataDir)
		if err != nil {
			return fmt.Errorf("--data-dir %q: %w", o.DataDir, err)
		}
		o.DataDir = abs
	}
	return nil
}

func main() {
	klog.InitFlags(nil)
	var o Options
	o.AddFlags(flag.CommandLine)
	flag.Parse()
	if err := run(&o); err != nil {
		klog.ErrorS(err, "mock CSI driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(o *Options) error {
	faults, err := o.Validate()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	stop := make(chan struct{})
	in, svc, err := newBackend(ctx, o, faults, stop)
	if err != nil {
		return err
	}
	if o.FaultsFile != "" {
		w := &fileWatcher{path: o.FaultsFile, in: in}
		// Read once before serving so that the file is in effect from the
		// first call; an invalid file at start-up is fatal.
		if err := w.check(); err != nil {
			return err
		}
		go w.run(ctx, o.PollInterval)
	}

	lis, err := listenUnix(o.CSIAddress)
	if err != nil {
		return err
	}
	defer os.Remove(o.CSIAddress)
	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary), grpc.UnknownServiceHandler(in.unknownService))
	csi.RegisterIdentityServer(srv, svc)
	csi.RegisterControllerServer(srv, svc)
	csi.RegisterNodeServer(srv, svc)
	if !o.NoGroups {
		csi.RegisterGroupControllerServer(srv, newGroupServer(in, svc))
	}
	serveErr := make(chan error, 3)
	go func() { serveErr <- srv.Serve(lis) }()

	var httpSrv *http.Server
	httpAddr := ""
	if o.HTTPAddress != "" {
		if httpSrv, httpAddr, err = serveHTTP(o.HTTPAddress, in.handler(svc), serveErr); err != nil {
			srv.Stop()
			return err
		}
	}
	if o.ReadyFile != "" {
		if err := writeReadyFile(o.ReadyFile, o.CSIAddress, httpAddr); err != nil {
			srv.Stop()
			return err
		}
		defer os.Remove(o.ReadyFile)
	}
	// Last: the kubelet dials the CSI socket as soon as it sees this one.
	stopRegistration := func() {}
	if o.PluginRegistrationDir != "" {
		if stopRegistration, err = serveRegistration(o.PluginRegistrationDir, o.DriverName, o.KubeletRegistrationPath, serveErr); err != nil {
			srv.Stop()
			return err
		}
	}
	klog.InfoS("Mock CSI driver serving", "driver", o.DriverName, "csiAddress", o.CSIAddress, "httpAddress", httpAddr)

	select {
	case <-ctx.Done():
		klog.InfoS("Stopping mock CSI driver")
	case err = <-serveErr:
		klog.ErrorS(err, "Serving failed")
	}
	close(stop) // release calls held by hang and latency faults
	stopRegistration()
	gracefulStop(srv, o.GracePeriod)
	if httpSrv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), o.GracePeriod)
		defer scancel()
		_ = httpSrv.Shutdown(sctx)
	}
	return err
}

// serveHTTP serves the HTTP API on addr (port 0 picks one) and returns the
// address it listens on; a failure while serving goes to serveErr.
func serveHTTP(addr string, h http.Handler, serveErr chan<- error) (*http.Server, string, error) {
	hl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--http-address: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(hl); !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	return srv, hl.Addr().String(), nil
}

// newBackend builds the mock service and the interceptor in front of it.
func newBackend(ctx context.Context, o *Options, faults Faults, stop <-chan struct{}) (*injector, service.Service, error) {
	in := newInjector(stop)
	in.hidden, _ = parseCapabilities(o.HideCaps)    // validated
	sizes, _ := parseVolumeSizesFlag(o.VolumeSizes) // validated
	in.setVolumeSizes(sizes, true)
	in.setFaults(faults, "flags")
	in.nodeID = o.NodeID
	in.memberDelete = o.AllowMemberDelete
	svc := service.New(service.Config{DriverName: o.DriverName, DisableAttach: o.DisableAttach})
	if err := in.recordBuiltins(ctx, svc); err != nil {
		return nil, nil, fmt.Errorf("listing the mock's built-in snapshots: %w", err)
	}
	if o.DataDir != "" {
		d, err := newDataStore(o.DataDir, svc)
		if err != nil {
			return nil, nil, fmt.Errorf("--data-dir: %w", err)
		}
		in.data = d
		klog.InfoS("Keeping volume data on disk", "dataDir", o.DataDir)
	}
	return in, svc, nil
}

// listenUnix listens on path, replacing a stale socket left by a killed
// driver (tests restart drivers on the same path).
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return lis, nil
}

func gracefulStop(srv *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		srv.Stop()
	}
}

func writeReadyFile(path, csiAddr, httpAddr string) error {
	data, err := json.Marshal(map[string]any{"csiAddress": csiAddr, "httpAddress": httpAddr, "pid": os.Getpid()})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// hiddenCaps are the capabilities --hide-capabilities removes.
type hiddenCaps struct {
	ctrl  map[csi.ControllerServiceCapability_RPC_Type]bool
	group map[csi.GroupControllerServiceCapability_RPC_Type]bool
}

// parseCapabilities parses a comma-separated list of controller and group
// controller capability names.
func parseCapabilities(list string) (hiddenCaps, error) {
	out := hiddenCaps{
		ctrl:  map[csi.ControllerServiceCapability_RPC_Type]bool{},
		group: map[csi.GroupControllerServiceCapability_RPC_Type]bool{},
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.ToUpper(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if v, ok := csi.ControllerServiceCapability_RPC_Type_value[name]; ok {
			out.ctrl[csi.ControllerServiceCapability_RPC_Type(v)] = true
			continue
		}
		if v, ok := csi.GroupControllerServiceCapability_RPC_Type_value[name]; ok {
			out.group[csi.GroupControllerServiceCapability_RPC_Type(v)] = true
			continue
		}
		return hiddenCaps{}, fmt.Errorf("unknown controller or group controller capability %q", name)
	}
	return out, nil
}
