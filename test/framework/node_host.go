package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node's configuration files and what it changes on the host.

func containerdConfig(root, runDir, cniConf string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  enable_selinux = false
  # CI machines drop CAP_SYS_RESOURCE: runc cannot set the negative
  # oom_score_adj the kubelet asks for sandboxes.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
`, root, filepath.Join(runDir, "state"), filepath.Join(runDir, "containerd.sock"), filepath.Join(runDir, "containerd.sock.ttrpc"),
		filepath.Join(root, "opt"), PauseImage, filepath.Join(runDir, "runc"), cniBinDir, cniConf)
}

func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "snapkeeper-node",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, nodeBridge, nodePodCIDR, ipamDir)
}

func kubeletConfig(sock, clientCA string, port, healthz int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# CI machines mount the cgroup v1 hierarchies only.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: 0.0.0.0
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
failSwapOn: false
resolvConf: /etc/resolv.conf
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
# A test machine's disk is shared with builds: evict on memory only, never
# collect the imported images (there is no registry to pull them again).
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 87600h
`, sock, port, healthz, clientCA)
}

func proxyConfig(kubeconfig, healthz, metrics string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: %s
metricsBindAddress: %s
conntrack:
  maxPerCore: 0
`, kubeconfig, nodePodCIDR, NodeName, healthz, metrics)
}

// hostState is what the host had before the node started, so that Stop
// removes only what the node added.
type hostState struct {
	ipForward string
	netns     map[string]bool
	chains    map[string]bool // "iptables filter KUBE-FOO"
	nft       map[string]bool // "table ip filter"
	cgroups   map[string]bool
}

var (
	iptablesCmds  = []string{"iptables", "ip6tables"}
	iptablesTable = []string{"filter", "nat", "mangle"}
)

func recordHost() (hostState, error) {
	h := hostState{netns: map[string]bool{}, chains: map[string]bool{}, nft: map[string]bool{}, cgroups: map[string]bool{}}
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return h, err
	}
	h.ipForward = strings.TrimSpace(string(b))
	for _, f := range globs("/run/netns/cni-*") {
		h.netns[f] = true
	}
	for _, c := range allChains() {
		h.chains[c] = true
	}
	for _, t := range nftTables() {
		h.nft[t] = true
	}
	for _, d := range nodeCgroups() {
		h.cgroups[d] = true
	}
	return h, nil
}

// prepare turns on what pod networking needs: forwarding between the
// bridge and the host, and iptables seeing bridged traffic (Service
// ClusterIPs reached from pods).
func (h hostState) prepare() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable ip_forward: %w", err)
	}
	_ = exec.Command("modprobe", "br_netfilter").Run()
	_ = os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("1"), 0o644)
	return nil
}

// Stop tears the node down and stops its control plane: pods first, by the
// kubelet (CNI DEL, unmounts) while everything still runs, then the
// processes, then whatever is left on the host.
func (n *Node) Stop() {
	if n.env != nil && len(n.procs) > 0 {
		n.env.StopControllerManager() // nothing recreates the pods deleted below
		n.deletePods()
	}
	for i := len(n.procs) - 1; i >= 1; i-- { // kube-proxy, kubelet, kube-scheduler
		n.procs[i].Stop(10 * time.Second)
	}
	if len(n.procs) > 0 {
		n.removeContainers()
		n.procs[0].Stop(10 * time.Second) // containerd
		n.killShims()
	}
	if n.runDir != "" {
		n.cleanHost()
		os.RemoveAll(n.runDir)
	}
	if n.env != nil {
		n.env.Stop()
	}
}

// deletePods deletes every pod with a one-second grace period and waits a
// minute for the kubelet to confirm.
func (n *Node) deletePods() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods := n.env.Kube.CoreV1().Pods(metav1.NamespaceAll)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	grace := int64(1)
	for _, p := range list.Items {
		_ = n.env.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	_ = pollProc(ctx, nil, time.Minute, "pods gone", func() error {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) > 0 {
			return fmt.Errorf("pods left (err %v)", err)
		}
		return nil
	})
}

func (n *Node) ctr(args ...string) []string {
	out, _ := exec.Command("ctr", append([]string{"--address", n.sock, "-n", "k8s.io"}, args...)...).Output()
	return strings.Fields(string(out))
}

// removeContainers kills and removes every container the kubelet left.
func (n *Node) removeContainers() {
	for _, t := range n.ctr("tasks", "ls", "-q") {
		n.ctr("tasks", "kill", "-s", "SIGKILL", t)
	}
	time.Sleep(time.Second)
	for _, t := range n.ctr("tasks", "ls", "-q") {
		n.ctr("tasks", "rm", "-f", t)
	}
	for _, c := range n.ctr("containers", "ls", "-q") {
		n.ctr("containers", "rm", c)
	}
}

// killShims kills the runc shims of this node's containerd.
func (n *Node) killShims() {
	for _, p := range n.shimPIDs() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// shimPIDs are the runc shims of this node's containerd: their command
// line names its socket, which no other containerd uses.
func (n *Node) shimPIDs() []int {
	var pids []int
	for _, pid := range globs("/proc/[0-9]*") {
		b, err := os.ReadFile(filepath.Join(pid, "cmdline"))
		if err != nil || n.sock == "" || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), n.sock) {
			continue
		}
		var p int
		if _, err := fmt.Sscan(filepath.Base(pid), &p); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// What the node added to the host, each against hostState: cleanHost
// removes it, Leftovers reports what is still there after.

// ownMounts are the mounts under the node's directories and of the
// network namespaces that appeared while it ran.
func (n *Node) ownMounts() []string {
	var mounts []string
	for _, m := range mountPoints() {
		if strings.HasPrefix(m, n.dir+"/") || m == n.dir || (n.runDir != "" && strings.HasPrefix(m, n.runDir+"/")) ||
			(strings.HasPrefix(m, "/run/netns/cni-") && !n.before.netns[m]) {
			mounts = append(mounts, m)
		}
	}
	return mounts
}

// newNetns are the CNI network namespaces that appeared while it ran.
func (n *Node) newNetns() []string {
	var out []string
	for _, f := range globs("/run/netns/cni-*") {
		if !n.before.netns[f] {
			out = append(out, f)
		}
	}
	return out
}

// addedChains are the iptables chains ("iptables filter KUBE-FOO") that
// appeared while it ran (the kubelet's, kube-proxy's, the CNI plugins').
func (n *Node) addedChains() map[string]bool {
	added := map[string]bool{}
	for _, c := range allChains() {
		if !n.before.chains[c] {
			added[c] = true
		}
	}
	return added
}

// addedTables are the ip and ip6 nftables tables (family, name) that
// appeared while it ran (iptables-nft's, for the node's rules).
func (n *Node) addedTables() [][2]string {
	var out [][2]string
	for _, t := range nftTables() {
		if f := strings.Fields(t); !n.before.nft[t] && len(f) == 3 && (f[1] == "ip" || f[1] == "ip6") {
			out = append(out, [2]string{f[1], f[2]})
		}
	}
	return out
}

// newCgroups are the kubepods and k8s.io cgroup trees that appeared while
// it ran.
func (n *Node) newCgroups() []string {
	var out []string
	for _, d := range nodeCgroups() {
		if !n.before.cgroups[d] {
			out = append(out, d)
		}
	}
	return out
}

// cleanHost unmounts, removes and deletes what the node added to the host.
func (n *Node) cleanHost() {
	mounts := n.ownMounts()
	sort.Sort(sort.Reverse(sort.StringSlice(mounts))) // deepest first
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	for _, f := range n.newNetns() {
		os.Remove(f)
	}
	_ = exec.Command("ip", "link", "del", nodeBridge).Run()
	if bin, err := Tool("kube-proxy"); err == nil {
		_ = exec.Command(bin, "--cleanup").Run()
	}
	n.removeChains()
	n.removeNFTables()
	for _, d := range n.newCgroups() {
		removeTree(d)
	}
	if n.before.ipForward != "" {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(n.before.ipForward), 0o644)
	}
}

// Leftovers is what the node left on the host after Stop, each as one
// line (nothing when the teardown was complete): its processes (by PID),
// containerd's shims on its socket, mounts under its directories, network
// namespaces, the bridge, iptables chains, nftables tables and cgroups
// that were not there before it started.
func (n *Node) Leftovers() []string {
	var left []string
	for _, p := range n.procs {
		if !p.Exited() {
			left = append(left, fmt.Sprintf("process %s (pid %d) still runs", p.Name, p.Pid()))
		}
	}
	for _, p := range n.shimPIDs() {
		left = append(left, fmt.Sprintf("containerd shim %d still runs", p))
	}
	for _, m := range n.ownMounts() {
		left = append(left, "mount "+m)
	}
	for _, f := range n.newNetns() {
		left = append(left, "network namespace "+f)
	}
	if exec.Command("ip", "link", "show", nodeBridge).Run() == nil {
		left = append(left, "bridge "+nodeBridge)
	}
	for c := range n.addedChains() {
		left = append(left, "chain "+c)
	}
	for _, t := range n.addedTables() {
		left = append(left, fmt.Sprintf("nftables table %s %s (%d rules)", t[0], t[1], nftRules(t[0], t[1])))
	}
	for _, d := range n.newCgroups() {
		left = append(left, "cgroup "+d)
	}
	return left
}

// removeChains deletes the iptables chains that appeared while the node
// ran (the kubelet's, kube-proxy's, the CNI plugins'), with the jumps into
// them from the built-in chains.
func (n *Node) removeChains() {
	added := n.addedChains()
	for _, ipt := range iptablesCmds {
		for _, tbl := range iptablesTable {
			rules, _ := exec.Command(ipt, "-t", tbl, "-S").Output()
			for _, r := range strings.Split(string(rules), "\n") {
				f := strings.Fields(r)
				if len(f) < 2 || f[0] != "-A" || added[ipt+" "+tbl+" "+f[1]] {
					continue
				}
				if j := jumpTarget(f); j != "" && added[ipt+" "+tbl+" "+j] {
					_ = exec.Command("sh", "-c", ipt+" -t "+tbl+" -D "+strings.TrimPrefix(r, "-A ")).Run()
				}
			}
			for c := range added {
				if p := strings.Fields(c); p[0] == ipt && p[1] == tbl {
					_ = exec.Command(ipt, "-t", tbl, "-F", p[2]).Run()
				}
			}
			for c := range added {
				if p := strings.Fields(c); p[0] == ipt && p[1] == tbl {
					_ = exec.Command(ipt, "-t", tbl, "-X", p[2]).Run()
				}
			}
		}
	}
}

func jumpTarget(rule []string) string {
	for i := 0; i+1 < len(rule); i++ {
		if rule[i] == "-j" || rule[i] == "-g" {
			return rule[i+1]
		}
	}
	return ""
}

// removeNFTables deletes the empty ip/ip6 tables iptables-nft created for
// the node's rules.
func (n *Node) removeNFTables() {
	for _, t := range n.addedTables() {
		if nftRules(t[0], t[1]) == 0 {
			_ = exec.Command("nft", "delete", "table", t[0], t[1]).Run()
		}
	}
}

// nftRules counts the rules of an nftables table: the lines of its listing
// that are not a table, a chain, a chain's hook and policy, or a brace
// (-1 when it cannot be listed).
func nftRules(family, table string) int {
	out, err := exec.Command("nft", "list", "table", family, table).Output()
	if err != nil {
		return -1
	}
	rules := 0
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "}" || strings.HasPrefix(l, "table ") || strings.HasPrefix(l, "chain ") || strings.HasPrefix(l, "type ") {
			continue
		}
		rules++
	}
	return rules
}

func allChains() []string {
	var out []string
	for _, ipt := range iptablesCmds {
		for _, tbl := range iptablesTable {
			rules, err := exec.Command(ipt, "-t", tbl, "-S").Output()
			if err != nil {
				continue
			}
			for _, r := range strings.Split(string(rules), "\n") {
				if f := strings.Fields(r); len(f) >= 2 && f[0] == "-N" {
					out = append(out, ipt+" "+tbl+" "+f[1])
				}
			}
		}
	}
	return out
}

func nftTables() []string {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	var ts []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ts = append(ts, l)
		}
	}
	return ts
}

// nodeCgroups are the cgroup directories the kubelet (kubepods) and the
// CRI plugin (k8s.io) create, in every hierarchy.
func nodeCgroups() []string {
	return append(globs("/sys/fs/cgroup/*/kubepods"), append(globs("/sys/fs/cgroup/*/k8s.io"), globs("/sys/fs/cgroup/kubepods")...)...)
}

// removeTree removes an empty cgroup tree, deepest directories first.
func removeTree(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(dirs[i])
	}
}

func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 {
			out = append(out, fs[4])
		}
	}
	return out
}

func globs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}
