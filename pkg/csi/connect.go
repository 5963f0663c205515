package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// DefaultTimeout bounds one CSI call when Options.Timeout is zero; it is
// the csi-snapshotter default of --timeout.
const DefaultTimeout = time.Minute

const (
	probeBackoffStart = 100 * time.Millisecond
	probeBackoffMax   = 2 * time.Second
	probeAttemptMax   = 10 * time.Second
	// reconnectBackoffMax caps gRPC's reconnect backoff (default: two
	// minutes). A local unix socket is cheap to dial, and a driver container
	// that restarted should be used again within a second, not minutes.
	reconnectBackoffMax = time.Second
)

// Options configure Connect.
type Options struct {
	// Timeout bounds each CSI call (the community --timeout flag); zero
	// means DefaultTimeout. The caller's context may end it sooner.
	Timeout time.Duration
	// Registerer receives csi_sidecar_operations_seconds; nil disables it.
	Registerer prometheus.Registerer
}

// PluginInfo is the driver's GetPluginInfo answer.
type PluginInfo struct {
	Name          string
	VendorVersion string
	Manifest      map[string]string
}

// Client is the production Driver: a gRPC connection to a CSI driver on a
// unix socket. It is safe for concurrent use. gRPC re-establishes a lost
// connection by itself; calls wait for it (WaitForReady) within their
// timeout, so a driver restart shows up as DeadlineExceeded at worst,
// which MayBeInProgress classifies as "retry".
//
// The plugin info and capabilities are read once at Connect; a driver that
// restarts with a different name or capabilities needs a new Client.
type Client struct {
	address  string
	conn     *grpc.ClientConn
	identity csipb.IdentityClient
	ctrl     csipb.ControllerClient
	timeout  time.Duration
	info     PluginInfo
	caps     Capabilities
}

var _ Driver = (*Client)(nil)

// Connect dials the driver at address (a socket path, or unix:// URL), waits
// until it answers Probe as ready (retrying with backoff until ctx ends),
// then reads GetPluginInfo and the controller (and group controller)
// capabilities once. It refuses, with an error wrapping
// ErrMissingCapability, a driver without CREATE_DELETE_SNAPSHOT.
func Connect(ctx context.Context, address string, opts Options) (*Client, error) {
	obs, err := newCallObserver(opts.Registerer)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	conn, err := grpc.NewClient(grpcTarget(address),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectBackoffMax},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithChainUnaryInterceptor(obs.unary),
	)
	if err != nil {
		return nil, fmt.Errorf("CSI driver at %s: %w", address, err)
	}
	c := &Client{
		address:  address,
		conn:     conn,
		identity: csipb.NewIdentityClient(conn),
		ctrl:     csipb.NewControllerClient(conn),
		timeout:  timeout,
	}
	if err := c.init(ctx, obs); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) init(ctx context.Context, obs *callObserver) error {
	logger := klog.FromContext(ctx)
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	info, err := c.pluginInfo(ctx)
	if err != nil {
		return err
	}
	c.info = info
	obs.setDriver(info.Name)
	if c.caps, err = c.capabilities(ctx); err != nil {
		return err
	}
	if !c.caps.CreateDeleteSnapshot {
		return fmt.Errorf("CSI driver %q at %s does not offer the controller capability CREATE_DELETE_SNAPSHOT, so snapshots can be neither created nor deleted through it: %w",
			info.Name, c.address, ErrMissingCapability)
	}
	logger.Info("Connected to CSI driver", "driver", info.Name, "version", info.VendorVersion, "address", c.address,
		"listSnapshots", c.caps.ListSnapshots, "groupSnapshots", c.caps.GroupSnapshots)
	return nil
}

// grpcTarget turns a socket path into a gRPC target.
func grpcTarget(address string) string {
	switch {
	case strings.HasPrefix(address, "unix:"):
		return address
	case strings.HasPrefix(address, "/"):
		return "unix://" + address
	default:
		return "unix:" + address
	}
}

// waitReady probes until the driver says it is ready. Connection errors and
// "not ready" are retried with backoff until ctx ends; a final error (the
// driver answered, and it will not change its mind) is returned at once.
func (c *Client) waitReady(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	delay := probeBackoffStart
	for attempt := 1; ; attempt++ {
		err := c.probeOnce(ctx)
		if err == nil {
			return nil
		}
		if IsFinal(err) {
			return fmt.Errorf("probing CSI driver at %s: %w", c.address, err)
		}
		// Quiet at first: the driver container usually starts a moment
		// after us.
		if attempt == 5 || attempt%20 == 0 {
			logger.Info("Still waiting for the CSI driver", "address", c.address, "attempt", attempt, "err", err)
		} else {
			logger.V(4).Info("CSI driver not ready yet", "address", c.address, "attempt", attempt, "err", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("CSI driver at %s did not become ready: %w (last error: %v)", c.address, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(delay*3/2, probeBackoffMax)
	}
}

var errNotReady = errors.New("driver reports not ready")

// probeOnce calls Probe fail-fast: while the socket is absent the call
// fails at once and waitReady's backoff decides when to try again.
func (c *Client) probeOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(c.timeout, probeAttemptMax))
	defer cancel()
	resp, err := c.identity.Probe(ctx, &csipb.ProbeRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return err
	}
	// An absent "ready" means ready (CSI spec).
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return errNotReady
	}
	return nil
}

// Probe asks the driver once whether it is ready (for health checks).
func (c *Client) Probe(ctx context.Context) error {
	if err := c.probeOnce(ctx); err != nil {
		return fmt.Errorf("probing CSI driver %q: %w", c.info.Name, err)
	}
	return nil
}

func (c *Client) pluginInfo(ctx context.Context) (PluginInfo, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.identity.GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return PluginInfo{}, fmt.Errorf("GetPluginInfo of CSI driver at %s: %w", c.address, err)
	}
	if resp.GetName() == "" {
		return PluginInfo{}, fmt.Errorf("CSI driver at %s returned an empty name from GetPluginInfo", c.address)
	}
	return PluginInfo{Name: resp.GetName(), VendorVersion: resp.GetVendorVersion(), Manifest: resp.GetManifest()}, nil
}

func (c *Client) capabilities(ctx context.Context) (Capabilities, error) {
	var caps Capabilities
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := c.ctrl.ControllerGetCapabilities(cctx, &csipb.ControllerGetCapabilitiesRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return caps, fmt.Errorf("ControllerGetCapabilities of CSI driver %q: %w", c.info.Name, err)
	}
	for _, cp := range resp.GetCapabilities() {
		switch cp.GetRpc().GetType() {
		case csipb.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT:
			caps.CreateDeleteSnapshot = true
		case csipb.ControllerServiceCapability_RPC_LIST_SNAPSHOTS:
			caps.ListSnapshots = true
		}
	}

	gctx, gcancel := c.callContext(ctx)
	defer gcancel()
	gresp, err := csipb.NewGroupControllerClient(c.conn).GroupControllerGetCapabilities(gctx,
		&csipb.GroupControllerGetCapabilitiesRequest{}, grpc.WaitForReady(true))
	switch {
	case status.Code(err) == codes.Unimplemented:
		// No GroupController service: no group snapshots.
	case err != nil:
		return caps, fmt.Errorf("GroupControllerGetCapabilities of CSI driver %q: %w", c.info.Name, err)
	default:
		for _, cp := range gresp.GetCapabilities() {
			if cp.GetRpc().GetType() == csipb.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT {
				caps.GroupSnapshots = true
			}
		}
	}
	return caps, nil
}

// callContext bounds one call by the client's timeout.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// Name is the driver name from GetPluginInfo.
func (c *Client) Name() string { return c.info.Name }

// Info is the driver's GetPluginInfo answer, read at Connect.
func (c *Client) Info() PluginInfo { return c.info }

// Capabilities were read at Connect.
func (c *Client) Capabilities() Capabilities { return c.caps }

// Close closes the connection; calls in flight fail with Canceled.
func (c *Client) Close() error { return c.conn.Close() }
