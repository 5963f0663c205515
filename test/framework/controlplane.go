package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminToken is the bearer token of the admin user (group system:masters).
const AdminToken = "snapkeeper-admin-token"

// ControlPlane is a real etcd and kube-apiserver on loopback ports.
type ControlPlane struct {
	Dir        string
	URL        string
	Kubeconfig string
	Config     *rest.Config
	etcd       *Process
	apiserver  *Process
	kcm        *Process // kube-controller-manager (cluster.go)
	kcmURL     string
	cluster    bool
	// members and servers are the production-shaped plane's etcd members
	// and API servers (prodplane.go); etcd and apiserver are their first.
	members []*EtcdMember
	servers []*APIServer
	cutMu   sync.Mutex
	cuts    map[string]int // members cut from the others, by name (CutEtcd)
}

// ControlPlaneOptions change the control plane from the test defaults (fast,
// disposable) towards a production API server. The zero value is what the
// e2e suites run with.
type ControlPlaneOptions struct {
	// Fsync lets etcd sync every write to disk (no --unsafe-no-fsync).
	Fsync bool
	// InflightDefaults leaves kube-apiserver's --max-requests-inflight and
	// --max-mutating-requests-inflight at their defaults (400 and 200,
	// shared out by API Priority and Fairness) instead of 1000 and 500.
	InflightDefaults bool
	// Cluster adds kube-controller-manager (cluster.go), started once the
	// CRDs are installed so that its garbage collector and namespace
	// controller see them from the start. SNAPKEEPER_PLANE=cluster sets it
	// for the shared plane of every suite.
	Cluster bool
	// Production runs etcd as three members, each reached by its peers
	// through a fault proxy, and two kube-apiservers on them
	// (prodplane.go): the plane of the production-fault scenarios.
	Production bool
	// Node shapes kube-apiserver for a real node (node.go, StartNodeEnv):
	// it serves on every address and advertises the host's, so that pods
	// reach it through the kubernetes Service; pods get ServiceAccount
	// tokens; the Node authorizer admits the kubelet; and it reaches the
	// kubelet (logs, exec) with a client certificate the kubelet trusts.
	Node bool
	// Profiling serves Go's profiles at /debug/pprof on kube-apiserver
	// (its default in a cluster) and etcd: the benchmark's -profile.
	Profiling bool
}

// StartControlPlane starts etcd and kube-apiserver in dir and waits until the
// API server is ready. Call Stop to end both.
func StartControlPlane(ctx context.Context, dir string) (*ControlPlane, error) {
	return StartControlPlaneWith(ctx, dir, ControlPlaneOptions{})
}

// StartControlPlaneWith is StartControlPlane with options.
func StartControlPlaneWith(ctx context.Context, dir string, o ControlPlaneOptions) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: dir}
	start := cp.startEtcd
	if o.Production {
		start = cp.startEtcdCluster
	}
	if err := start(o); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.startAPIServer(ctx, o); err != nil {
		cp.Stop()
		return nil, err
	}
	if o.Production {
		if err := cp.startSecondAPIServer(ctx, o); err != nil {
			cp.Stop()
			return nil, err
		}
	}
	return cp, nil
}

func (cp *ControlPlane) startEtcd(o ControlPlaneOptions) error {
	bin, err := Tool("etcd")
	if err != nil {
		return err
	}
	client, err := FreeAddr()
	if err != nil {
		return err
	}
	peer, err := FreeAddr()
	if err != nil {
		return err
	}
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=http://" + client,
		"--advertise-client-urls=http://" + client,
		"--listen-peer-urls=http://" + peer,
		"--initial-advertise-peer-urls=http://" + peer,
		"--initial-cluster=default=http://" + peer,
		"--log-level=warn",
	}
	if o.Profiling {
		args = append(args, "--enable-pprof=true")
	}
	if !o.Fsync {
		// Test data is disposable: skip fsync so the disk is not the bottleneck.
		args = append(args, "--unsafe-no-fsync=true")
	}
	cp.etcd, err = StartProcess(cp.Dir, "etcd", bin, args)
	if err != nil {
		return err
	}
	cp.URL = "http://" + client // temporarily: the etcd URL, replaced below
	return nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, o ControlPlaneOptions) error {
	etcdURL := cp.URL
	bin, port, err := serverTool("kube-apiserver")
	if err != nil {
		return err
	}
	certDir := filepath.Join(cp.Dir, "apiserver-certs")
	tokens := filepath.Join(cp.Dir, "tokens.csv")
	users := AdminToken + ",admin,admin,system:masters\n" + seatTokens()
	if o.Node {
		users += nodeToken + ",system:node:" + NodeName + ",kubelet,system:nodes\n"
		if err := writeKubeletPKI(cp.Dir); err != nil {
			return err
		}
	}
	if err := os.WriteFile(tokens, []byte(users), 0o600); err != nil {
		return err
	}
	saKey := filepath.Join(cp.Dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	args := cp.apiServerArgs(o, etcdURL, port, certDir)
	cp.apiserver, err = StartProcess(cp.Dir, "kube-apiserver", bin, args)
	if err != nil {
		return err
	}
	cp.servers = append(cp.servers, &APIServer{URL: cp.URL, proc: cp.apiserver})
	cp.Config = &rest.Config{
		Host:            cp.URL,
		BearerToken:     AdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1, // the tests' own client is never the bottleneck
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := WriteKubeconfig(cp.Kubeconfig, cp.URL, AdminToken); err != nil {
		return err
	}
	return cp.waitReady(ctx)
}

// apiServerArgs are the flags of a kube-apiserver on etcdURL (one or more
// client URLs, comma-separated) serving on port with its certificates in
// certDir. Every API server of a plane shares the token file, the
// service-account key and the issuer (the first server's URL), so a token
// of one is valid on all.
func (cp *ControlPlane) apiServerArgs(o ControlPlaneOptions, etcdURL string, port int, certDir string) []string {
	issuer := cp.URL
	if len(cp.servers) > 0 {
		issuer = cp.servers[0].URL
	}
	saKey := filepath.Join(cp.Dir, "sa.key")
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=" + issuer,
		"--api-audiences=" + issuer,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// A loopback address cannot be published as the kubernetes Service endpoint.
		"--endpoint-reconciler-type=none",
		// No controller-manager runs, so nothing would create the default
		// ServiceAccount that this plugin insists on for pods.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=" + strconv.FormatBool(o.Profiling),
		"-v=1",
	}
	if !o.InflightDefaults {
		args = append(args, "--max-requests-inflight=1000", "--max-mutating-requests-inflight=500")
	}
	if o.Node {
		args = nodeAPIServerArgs(args, cp.Dir)
	}
	if o.Production {
		args = append(args, cp.auditArgs(len(cp.servers))...)
	}
	return args
}

func (cp *ControlPlane) waitReady(ctx context.Context) error {
	return waitHealthy(ctx, "kube-apiserver", cp.URL+"/readyz", AdminToken, cp.apiserver, cp.etcd)
}

// waitHealthy polls url (with bearer, when set) for two minutes until it
// answers 200, failing early when one of procs exits; the error carries the
// tail of procs[0]'s log, the process serving url.
func waitHealthy(ctx context.Context, name, url, bearer string, procs ...*Process) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // local test server with a self-signed cert
	}}
	var last string
	for {
		for _, p := range procs {
			if p.Exited() {
				return fmt.Errorf("%s exited:\n%s", p.Name, p.Tail(4000))
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last: %s): %w\n%s", name, last, ctx.Err(), procs[0].Tail(4000))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends kube-controller-manager, the API server, then etcd.
func (cp *ControlPlane) Stop() {
	if cp.kcm != nil {
		cp.kcm.Stop(10 * time.Second)
	}
	if cp.apiserver != nil {
		cp.apiserver.Stop(10 * time.Second)
	}
	for _, s := range cp.servers[min(1, len(cp.servers)):] {
		s.proc.Stop(10 * time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.Stop(10 * time.Second)
	}
	cp.stopMembers()
}

// WriteKubeconfig writes a kubeconfig for a token user of the server at url.
func WriteKubeconfig(path, url, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: url, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return os.WriteFile(path, b, 0o600)
}
