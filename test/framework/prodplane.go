package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework/faultproxy"
)

// The production-shaped plane (ControlPlaneOptions.Production): etcd as
// three members and two kube-apiservers on them, as production runs them.
// Every member advertises its peer URL through a fault proxy of the test,
// which labels each connection with the member that opened it (rafthttp's
// X-Server-From header), so a member can be cut from the others in both
// directions while it runs (CutEtcd) and quorum lost on demand. The
// API servers share tokens and the service-account key; the test puts its
// own fault proxies between each controller replica and its API server.

// etcdMembers is the size of the production plane's etcd cluster.
const etcdMembers = 3

// EtcdMember is one member of the production plane's etcd cluster.
type EtcdMember struct {
	Name      string
	ClientURL string
	// ID is the member id in hex, as rafthttp names it.
	ID string
	// Peer is the fault proxy in front of the member's peer port: the
	// other members reach it only through Peer.
	Peer *faultproxy.Proxy

	mu   sync.Mutex
	proc *Process
	bin  string
	args []string
	dir  string
}

// APIServer is one kube-apiserver of the plane.
type APIServer struct {
	URL  string
	proc *Process
}

// startEtcdCluster starts the three members together and waits until they
// elected a leader; cp.URL is then every client URL, comma-separated.
func (cp *ControlPlane) startEtcdCluster(o ControlPlaneOptions) error {
	bin, err := Tool("etcd")
	if err != nil {
		return err
	}
	var initial []string
	peers := make([]string, etcdMembers)
	for i := range etcdMembers {
		m := &EtcdMember{Name: fmt.Sprintf("m%d", i), bin: bin, dir: cp.Dir}
		client, err := FreeAddr()
		if err != nil {
			return err
		}
		if peers[i], err = FreeAddr(); err != nil {
			return err
		}
		m.Peer, err = faultproxy.New(faultproxy.Options{Network: "tcp", Listen: "127.0.0.1:0", Target: peers[i], LabelHeader: "X-Server-From"})
		if err != nil {
			return err
		}
		m.ClientURL = "http://" + client
		cp.members = append(cp.members, m)
		initial = append(initial, m.Name+"=http://"+m.Peer.Addr())
	}
	var urls []string
	for i, m := range cp.members {
		m.args = []string{
			"--name=" + m.Name,
			"--data-dir=" + filepath.Join(cp.Dir, "etcd-"+m.Name),
			"--listen-client-urls=" + m.ClientURL,
			"--advertise-client-urls=" + m.ClientURL,
			"--listen-peer-urls=http://" + peers[i],
			"--initial-advertise-peer-urls=http://" + m.Peer.Addr(),
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=snapkeeper-prod",
			"--log-level=warn",
		}
		if !o.Fsync {
			m.args = append(m.args, "--unsafe-no-fsync=true")
		}
		if err := m.Start(); err != nil {
			return err
		}
		urls = append(urls, m.ClientURL)
	}
	cp.etcd = cp.members[0].proc
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cp.learnMemberIDs(ctx); err != nil {
		return err
	}
	if _, err := cp.EtcdLeader(ctx); err != nil {
		return err
	}
	cp.URL = strings.Join(urls, ",") // the etcd URLs until startAPIServer
	return nil
}

// Start starts the member (again, on its data directory).
func (m *EtcdMember) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && !m.proc.Exited() {
		return fmt.Errorf("etcd member %s still runs", m.Name)
	}
	p, err := StartProcess(m.dir, "etcd-"+m.Name, m.bin, m.args)
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

// Kill SIGKILLs the member and waits until it is gone.
func (m *EtcdMember) Kill() error {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	p.Signal(syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err == context.DeadlineExceeded {
		return fmt.Errorf("etcd member %s survived SIGKILL", m.Name)
	}
	return nil
}

// Running reports whether the member's process runs.
func (m *EtcdMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && !m.proc.Exited()
}

// EtcdMembers are the production plane's members (nil on other planes).
func (cp *ControlPlane) EtcdMembers() []*EtcdMember { return cp.members }

// learnMemberIDs reads the member list once every member answers.
func (cp *ControlPlane) learnMemberIDs(ctx context.Context) error {
	var list struct {
		Members []struct {
			ID   string `json:"ID"`
			Name string `json:"name"`
		} `json:"members"`
	}
	err := PollContext(ctx, time.Minute, "etcd member list", func() error {
		return etcdPost(ctx, cp.members[0].ClientURL+"/v3/cluster/member/list", `{}`, &list)
	})
	if err != nil {
		return err
	}
	for _, l := range list.Members {
		id, err := strconv.ParseUint(l.ID, 10, 64)
		if err != nil {
			return fmt.Errorf("etcd member id %q: %w", l.ID, err)
		}
		for _, m := range cp.members {
			if m.Name == l.Name {
				m.ID = strconv.FormatUint(id, 16)
			}
		}
	}
	for _, m := range cp.members {
		if m.ID == "" {
			return fmt.Errorf("etcd member %s is not in the member list %+v", m.Name, list.Members)
		}
	}
	return nil
}

// EtcdLeader waits (up to a minute, or ctx) until a running member reports
// a leader that a majority of the running members agree on, and returns it.
func (cp *ControlPlane) EtcdLeader(ctx context.Context) (*EtcdMember, error) {
	var leader *EtcdMember
	err := PollContext(ctx, time.Minute, "an etcd leader", func() error {
		votes := map[string]int{}
		for _, m := range cp.members {
			if !m.Running() {
				continue
			}
			var st struct {
				Leader string `json:"leader"`
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := etcdPost(sctx, m.ClientURL+"/v3/maintenance/status", `{}`, &st)
			cancel()
			if err != nil || st.Leader == "" || st.Leader == "0" {
				continue
			}
			votes[st.Leader]++
		}
		for id, n := range votes {
			if n*2 > len(cp.members) {
				u, err := strconv.ParseUint(id, 10, 64)
				if err != nil {
					return err
				}
				for _, m := range cp.members {
					if m.ID == strconv.FormatUint(u, 16) {
						leader = m
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no leader a majority agrees on (%v)", votes)
	})
	return leader, err
}

// CutEtcd cuts each named member from every other member in both
// directions (its process keeps running and keeps serving its clients what
// it can without quorum): raft traffic towards it stalls in its peer
// proxy, raft traffic from it stalls in the others'. Cuts add up (two cuts
// of one member each lose quorum; a member cut twice stays cut until both
// are healed). The returned func heals this cut; stalled bytes are then
// delivered, as TCP delivers them after a partition.
func (cp *ControlPlane) CutEtcd(names ...string) (heal func(), err error) {
	for _, n := range names {
		if cp.member(n) == nil {
			return nil, fmt.Errorf("no etcd member %q", n)
		}
	}
	cp.cutMu.Lock()
	defer cp.cutMu.Unlock()
	if cp.cuts == nil {
		cp.cuts = map[string]int{}
	}
	for _, n := range names {
		cp.cuts[n]++
	}
	cp.applyCuts()
	var once sync.Once
	return func() {
		once.Do(func() {
			cp.cutMu.Lock()
			defer cp.cutMu.Unlock()
			for _, n := range names {
				cp.cuts[n]--
			}
			cp.applyCuts()
		})
	}, nil
}

// applyCuts sets every peer proxy from cp.cuts (cutMu held).
func (cp *ControlPlane) applyCuts() {
	var ids []string
	for _, m := range cp.members {
		if cp.cuts[m.Name] > 0 {
			ids = append(ids, m.ID)
		}
	}
	sort.Strings(ids)
	for _, m := range cp.members {
		if cp.cuts[m.Name] > 0 {
			m.Peer.Set(faultproxy.Faults{Stall: true})
		} else {
			m.Peer.Set(faultproxy.Faults{StallLabels: ids})
		}
	}
}

func (cp *ControlPlane) member(name string) *EtcdMember {
	for _, m := range cp.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// stopMembers stops every member but the first (Stop ends cp.etcd) and
// closes their proxies.
func (cp *ControlPlane) stopMembers() {
	for _, m := range cp.members {
		m.mu.Lock()
		if m.proc != nil && m.proc != cp.etcd {
			m.proc.Stop(10 * time.Second)
		}
		m.mu.Unlock()
		m.Peer.Close()
	}
}

// startSecondAPIServer starts a second kube-apiserver on the same etcd
// cluster, with the first one's tokens and service-account key.
func (cp *ControlPlane) startSecondAPIServer(ctx context.Context, o ControlPlaneOptions) error {
	bin, port, err := serverTool("kube-apiserver")
	if err != nil {
		return err
	}
	var urls []string
	for _, m := range cp.members {
		urls = append(urls, m.ClientURL)
	}
	// This one serves watches from etcd, not from a watch cache, as some
	// production servers do for large resources: a watch resumed from a
	// compacted revision is answered "too old resource version" at once.
	args := append(cp.apiServerArgs(o, strings.Join(urls, ","), port, filepath.Join(cp.Dir, "apiserver-certs-1")), "--watch-cache=false")
	p, err := StartProcess(cp.Dir, "kube-apiserver-1", bin, args)
	if err != nil {
		return err
	}
	s := &APIServer{URL: fmt.Sprintf("https://127.0.0.1:%d", port), proc: p}
	cp.servers = append(cp.servers, s)
	return waitHealthy(ctx, "kube-apiserver-1", s.URL+"/readyz", AdminToken, p)
}

// APIServers are the plane's API servers, the first being URL's.
func (cp *ControlPlane) APIServers() []*APIServer { return cp.servers }

// HostPort is the server's address without the scheme.
func (s *APIServer) HostPort() string { return strings.TrimPrefix(s.URL, "https://") }
