package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A real node next to the control plane: containerd (Debian's, with runc
// and the CNI plugins), kubelet, kube-scheduler and kube-proxy from the
// same k8s.io/kubernetes build as kube-apiserver. Pods are scheduled,
// pulled from images imported into containerd (no registry), probed,
// networked over a bridge and reached through Service ClusterIPs. It
// changes the host (a bridge, iptables chains, mounts, network namespaces,
// cgroups, ip_forward); Stop undoes what this node created, found by the
// PIDs, names and paths it recorded, never by process name. One node per
// machine at a time: `make test-node` runs test/node alone.

// NodeEnv names the variable `make test-node` sets; without it the node
// suites skip (they change the host and need root).
const NodeEnv = "SNAPKEEPER_NODE"

// NodeName is the Node's name (and its kubelet's user, system:node:NodeName).
const NodeName = "snapkeeper-node"

const (
	nodeToken  = "snapkeeper-node-token"
	nodeBridge = "snapk0"
	// nodePodCIDR is the bridge network's range: pod IPs.
	nodePodCIDR = "10.89.0.0/16"
	// PauseImage is the sandbox image containerd starts for every pod
	// (hack/tools/kube/pause, packed by `make node-images`).
	PauseImage = "snapkeeper.local/pause:1"
)

// NodeMissing returns why a node cannot run here ("" when it can): not
// root, or an OS package or built binary missing; the text says what to
// run.
func NodeMissing() string {
	if os.Getuid() != 0 {
		return "the node plane needs root (it starts containerd and the kubelet)"
	}
	if why := missingCaps(); why != "" {
		return why
	}
	var missing []string
	for _, b := range []string{"containerd", "runc", "ctr", "iptables", "conntrack", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, "CNI plugin "+p)
		}
	}
	if len(missing) > 0 {
		return "missing " + strings.Join(missing, ", ") + ": run `hack/node-deps.sh` as root (Debian packages)"
	}
	for _, t := range []string{"kubelet", "kube-scheduler", "kube-proxy", "node-images/pause.tar"} {
		if _, err := Tool(t); err != nil {
			return fmt.Sprintf("bin/%s is missing: run `make node-tools node-images`", t)
		}
	}
	return ""
}

const cniBinDir = "/usr/lib/cni"

// missingCaps says which capabilities the node plane needs that root lacks
// here (a container's root often has neither): CAP_NET_ADMIN for the
// bridge, iptables and network namespaces, CAP_SYS_ADMIN for mounts and
// cgroups. "" when both are effective.
func missingCaps() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return ""
		}
		var missing []string
		for _, c := range []struct {
			bit  uint
			name string
		}{{12, "CAP_NET_ADMIN"}, {21, "CAP_SYS_ADMIN"}} {
			if eff&(1<<c.bit) == 0 {
				missing = append(missing, c.name)
			}
		}
		if len(missing) > 0 {
			return "the node plane needs " + strings.Join(missing, " and ") + " (the bridge, iptables, mounts, cgroups), which root lacks here"
		}
	}
	return ""
}

// Node is a running node (StartNodeEnv).
type Node struct {
	// IP is the host address kube-apiserver advertises and the kubelet
	// reports.
	IP string
	// KubeletDir is the kubelet's root directory: a CSI driver's pod mounts
	// KubeletDir/plugins/<driver>, KubeletDir/plugins_registry and
	// KubeletDir/pods from the host.
	KubeletDir string
	dir        string
	runDir     string
	sock       string
	env        *Env
	procs      []*Process // containerd, kube-scheduler, kubelet, kube-proxy
	shared     map[string]bool
	before     hostState
}

// StartNodeEnv starts a control plane shaped for a node
// (ControlPlaneOptions.Node), kube-controller-manager and a node, and
// waits until the Node is Ready. No CRD is installed: a chart installs
// them as on any cluster. Stop the node (it stops the plane too).
func StartNodeEnv(ctx context.Context) (*Env, *Node, error) {
	if why := NodeMissing(); why != "" {
		return nil, nil, errors.New(why)
	}
	dir, err := os.MkdirTemp("", "snapkeeper-node-")
	if err != nil {
		return nil, nil, err
	}
	cp, err := StartControlPlaneWith(ctx, dir, ControlPlaneOptions{Node: true})
	if err != nil {
		return nil, nil, err
	}
	env, err := NewEnv(cp)
	if err == nil {
		err = cp.StartControllerManager(ctx)
	}
	if err != nil {
		cp.Stop()
		return nil, nil, err
	}
	n := &Node{IP: hostIP(), dir: filepath.Join(dir, "node"), env: env}
	n.KubeletDir = filepath.Join(n.dir, "kubelet")
	if err := n.start(ctx); err != nil {
		n.Stop()
		return nil, nil, err
	}
	return env, n, nil
}

func (n *Node) start(ctx context.Context) error {
	var err error
	if n.runDir, err = os.MkdirTemp("/run", "snapkeeper-node-"); err != nil {
		return err
	}
	n.sock = filepath.Join(n.runDir, "containerd.sock")
	if n.before, err = recordHost(); err != nil {
		return err
	}
	if err := n.before.prepare(); err != nil {
		return err
	}
	if err := os.MkdirAll(n.KubeletDir, 0o755); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := n.ImportImage(ctx, "pause.tar"); err != nil {
		return err
	}
	for _, start := range []func() error{n.startScheduler, n.startKubelet, n.startProxy} {
		if err := start(); err != nil {
			return err
		}
	}
	return n.waitReady(ctx, 2*time.Minute)
}

// ImportImage imports bin/node-images/<file> (a tarball of `make
// node-images`) into containerd's k8s.io namespace, where the kubelet finds
// it: pods run it without a registry.
func (n *Node) ImportImage(ctx context.Context, file string) error {
	tar, err := Tool(filepath.Join("node-images", file))
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", tar, err, out)
	}
	return nil
}

// SharedDir creates a directory on the host, under the node's own, that
// pods may mount with Bidirectional propagation (a CSI driver's data):
// the host's "/" is a private mount here, so the directory is bound onto
// itself and made shared, as the kubelet does with its root directory.
// Stop unmounts it.
func (n *Node) SharedDir(name string) (string, error) {
	dir := filepath.Join(n.dir, name)
	if n.shared[dir] {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind %s: %w", dir, err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
		return "", fmt.Errorf("make %s shared: %w", dir, err)
	}
	if n.shared == nil {
		n.shared = map[string]bool{}
	}
	n.shared[dir] = true
	return dir, nil
}

func (n *Node) startContainerd(ctx context.Context) error {
	conf := filepath.Join(n.dir, "containerd.toml")
	if err := writeFiles(map[string]string{
		conf: containerdConfig(filepath.Join(n.dir, "containerd"), n.runDir, filepath.Join(n.dir, "cni")),
		filepath.Join(n.dir, "cni", "10-snapkeeper.conflist"): cniConfig(filepath.Join(n.runDir, "cni-ipam")),
	}); err != nil {
		return err
	}
	p, err := StartProcess(n.dir, "containerd", "containerd", []string{"--config", conf})
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return pollProc(ctx, p, 30*time.Second, "containerd serving", func() error {
		return exec.CommandContext(ctx, "ctr", "--address", n.sock, "version").Run()
	})
}

func (n *Node) startScheduler() error {
	bin, port, err := serverTool("kube-scheduler")
	if err != nil {
		return err
	}
	kc := n.env.Kubeconfig
	return n.run("kube-scheduler", bin, "--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "-v=1")
}

func (n *Node) startKubelet() error {
	bin, err := Tool("kubelet")
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	healthz, err := FreePort()
	if err != nil {
		return err
	}
	conf, kc := filepath.Join(n.dir, "kubelet.yaml"), filepath.Join(n.dir, "kubelet.kubeconfig")
	if err := WriteKubeconfig(kc, n.env.URL, nodeToken); err != nil {
		return err
	}
	if err := writeFiles(map[string]string{conf: kubeletConfig(n.sock, filepath.Join(n.env.Dir, "kubelet-pki", "ca.crt"), port, healthz)}); err != nil {
		return err
	}
	return n.run("kubelet", bin, "--config="+conf, "--kubeconfig="+kc, "--root-dir="+n.KubeletDir,
		"--cert-dir="+filepath.Join(n.dir, "kubelet-certs"), "--node-ip="+n.IP, "--hostname-override="+NodeName, "-v=1")
}

func (n *Node) startProxy() error {
	bin, err := Tool("kube-proxy")
	if err != nil {
		return err
	}
	healthz, err := FreeAddr()
	if err != nil {
		return err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return err
	}
	conf := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := writeFiles(map[string]string{conf: proxyConfig(n.env.Kubeconfig, healthz, metrics)}); err != nil {
		return err
	}
	return n.run("kube-proxy", bin, "--config="+conf, "-v=1")
}

func (n *Node) run(name, bin string, args ...string) error {
	p, err := StartProcess(n.dir, name, bin, args)
	if err == nil {
		n.procs = append(n.procs, p)
	}
	return err
}

// RestartKubelet stops the kubelet (SIGTERM, as a service manager
// restarts it), starts it again with the same configuration and waits
// until the Node is Ready; running containers are left to containerd.
func (n *Node) RestartKubelet(ctx context.Context) error {
	for i, p := range n.procs {
		if p.Name != "kubelet" {
			continue
		}
		p.Stop(30 * time.Second)
		n.procs = append(n.procs[:i], n.procs[i+1:]...)
		if err := n.startKubelet(); err != nil {
			return err
		}
		return n.waitReady(ctx, 2*time.Minute)
	}
	return errors.New("no kubelet running")
}

// waitReady waits until the Node reports Ready.
func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	return n.poll(ctx, timeout, "node "+NodeName+" Ready", func() error {
		node, err := n.env.Kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not Ready yet")
	})
}

// poll calls f every half second until it returns nil, failing early when
// one of the node's processes exited.
func (n *Node) poll(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	return pollProc(ctx, nil, timeout, what, func() error {
		for _, p := range n.procs {
			if p.Exited() {
				return fmt.Errorf("%w: %s exited:\n%s", errExited, p.Name, p.Tail(3000))
			}
		}
		return f()
	})
}

var errExited = errors.New("process exited")

func pollProc(ctx context.Context, p *Process, timeout time.Duration, what string, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if errors.Is(err, errExited) {
			return err
		}
		if p != nil && p.Exited() {
			return fmt.Errorf("%s exited:\n%s", p.Name, p.Tail(3000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v: %v", what, timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// hostIP is the address of the host's default route: pods reach the API
// server there (loopback is each pod's own).
func hostIP() string {
	if c, err := net.Dial("udp", "192.0.2.1:9"); err == nil { // no packet is sent
		defer c.Close()
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsLoopback() {
			return a.IP.String()
		}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			return ip.IP.String()
		}
	}
	return "127.0.0.1"
}

// nodeAPIServerArgs turns the test plane's kube-apiserver flags into a
// node's (ControlPlaneOptions.Node).
func nodeAPIServerArgs(args []string, dir string) []string {
	drop := map[string]bool{
		"--bind-address=127.0.0.1": true, "--advertise-address=127.0.0.1": true, "--authorization-mode=RBAC": true,
		"--endpoint-reconciler-type=none": true, "--disable-admission-plugins=ServiceAccount": true,
	}
	var out []string
	for _, a := range args {
		if !drop[a] {
			out = append(out, a)
		}
	}
	pki := filepath.Join(dir, "kubelet-pki")
	return append(out,
		"--bind-address=0.0.0.0",
		"--advertise-address="+hostIP(),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		// The node's name (--hostname-override) is in no DNS: logs, exec
		// and port-forward reach the kubelet at its address.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-client-certificate="+filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+filepath.Join(pki, "apiserver-kubelet-client.key"),
	)
}

// writeKubeletPKI writes the CA the kubelet trusts for client
// certificates and kube-apiserver's client certificate from it.
func writeKubeletPKI(dir string) error {
	pki := filepath.Join(dir, "kubelet-pki")
	if err := os.MkdirAll(pki, 0o755); err != nil {
		return err
	}
	ca, err := NewCA("snapkeeper-node-kubelet-ca")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return err
	}
	return ca.Client(pki, "apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters")
}

func writeFiles(files map[string]string) error {
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}
