// Package faultproxy is a fault-injecting layer-4 proxy for end-to-end
// fault tests. It accepts connections on a TCP address or a unix socket,
// dials its target for each one and forwards the bytes both ways, injecting
// the faults the test sets (and changes while connections are open):
// latency, jitter and latency spikes, bandwidth limits, stalls (a partition
// that holds the bytes and delivers them once it heals), one-way blackholes,
// resets and refused connections. With Options.LabelHeader it labels each
// plaintext HTTP connection with a header of its first request, so that
// only some clients' connections can be stalled (etcd members by rafthttp's
// X-Server-From, for instance).
//
// The proxy knows nothing of the protocols it carries: TLS and HTTP/2 to a
// kube-apiserver, gRPC to a CSI driver on a unix socket and rafthttp between
// etcd members all go through it unchanged.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the dial of the target for each accepted connection.
const dialTimeout = 5 * time.Second

// Options of a proxy.
type Options struct {
	// Network is "tcp" (or "tcp4", "tcp6") or "unix", for both the listener
	// and the target.
	Network string
	// Listen is the address to listen on ("127.0.0.1:0" for a free port) or
	// the socket path (removed first if it exists).
	Listen string
	// Target is the address or socket path dialed for each accepted
	// connection (with a 5 s timeout); a connection whose dial fails is
	// closed (counted in Stats.DialErrors).
	Target string
	// Seed seeds the random choices of Faults.Jitter and Faults.SpikeProb
	// (math/rand/v2 PCG). Each direction of each connection draws from a
	// generator of its own, seeded with Seed and the connection's accept
	// number, two numbers per chunk, so a run whose connections and chunks
	// come in the same order draws the same delays.
	Seed uint64
	// LabelHeader, when set, names an HTTP request header (e.g.
	// "X-Server-From") that the proxy reads from the first request of each
	// connection to label the connection with the header's value (see
	// Proxy.Labels and Faults.StallLabels). Only plaintext HTTP/1.x is
	// understood: the proxy peeks the client's first bytes up to the end of
	// the header block, at most 16 KiB, without consuming them (they are
	// forwarded unchanged, after the label is known). A connection whose
	// first bytes are not an HTTP request line (TLS, HTTP/2, gRPC; decided
	// from the first bytes, without waiting) or whose header block is not
	// complete within 16 KiB or 2 s gets the label "", as does a request
	// without the header. Nothing is forwarded in either direction before
	// the label is known, so a protocol whose server speaks first waits up
	// to 2 s. Without LabelHeader every connection's label is "".
	LabelHeader string
}

// Proxy is a running fault proxy. Its methods may be called from any
// goroutine.
type Proxy struct {
	opts   Options
	ln     net.Listener
	ctx    context.Context // canceled by Close: ends dials in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the proxy

	mu       sync.Mutex
	closed   bool
	faults   Faults
	stallSet map[string]bool
	changed  chan struct{} // closed and replaced on each change of faults
	conns    map[*conn]struct{}

	accepted   atomic.Int64
	bytesUp    atomic.Int64
	bytesDown  atomic.Int64
	resets     atomic.Int64
	refused    atomic.Int64
	dialErrors atomic.Int64
	discarded  atomic.Int64
}

// Stats are counters of a proxy since New.
type Stats struct {
	// Accepted counts the connections accepted, refused ones included.
	Accepted int64
	// Open is the number of connections open now: target dialed and not
	// yet closed (stalled ones included).
	Open int
	// BytesUp and BytesDown count the bytes delivered: written to the
	// target and to the client respectively (not the discarded ones).
	BytesUp, BytesDown int64
	// Resets counts the connections closed abruptly by Reset or because a
	// Blackhole that broke them was cleared.
	Resets int64
	// Refused counts the connections closed at accept by Faults.Refuse.
	Refused int64
	// DialErrors counts the connections closed because the target could
	// not be dialed.
	DialErrors int64
	// Discarded counts the bytes dropped by Faults.Blackhole.
	Discarded int64
}

// New listens on o.Listen and starts accepting; Close stops it.
func New(o Options) (*Proxy, error) {
	switch o.Network {
	case "tcp", "tcp4", "tcp6":
	case "unix":
		if err := os.Remove(o.Listen); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("faultproxy: %w", err)
		}
	default:
		return nil, fmt.Errorf("faultproxy: network %q is neither tcp nor unix", o.Network)
	}
	if o.Target == "" {
		return nil, errors.New("faultproxy: no target")
	}
	ln, err := net.Listen(o.Network, o.Listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{
		opts:    o,
		ln:      ln,
		changed: make(chan struct{}),
		conns:   map[*conn]struct{}{},
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the listening address ("127.0.0.1:port") or socket path.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening (a unix socket file is removed), closes every
// connection (without a reset; held bytes are dropped) and returns once
// every goroutine of the proxy has ended. Later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	conns := p.connList()
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, c := range conns {
		c.close(false)
	}
	p.wg.Wait()
	return err
}

// Set replaces the faults. It applies at once to open connections (pumps
// waiting on a stall or a delay reconsider at once) and to new ones. A
// connection that lost bytes to a Blackhole that f no longer sets for that
// direction is Reset before Set returns.
func (p *Proxy) Set(f Faults) {
	f = f.clone()
	set := make(map[string]bool, len(f.StallLabels))
	for _, l := range f.StallLabels {
		set[l] = true
	}
	p.mu.Lock()
	p.faults = f
	p.stallSet = set
	var broken []*conn
	for c := range p.conns {
		if c.lost&^f.Blackhole != 0 && !c.broken {
			c.broken = true
			broken = append(broken, c)
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	for _, c := range broken {
		if c.close(true) {
			p.resets.Add(1)
		}
	}
}

// Faults returns the current faults.
func (p *Proxy) Faults() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults.clone()
}

// Reset closes every open connection abruptly on both sides (for TCP after
// SetLinger(0), so both the client and the target get a reset; a unix
// socket peer reads EOF, or a reset if it had bytes the proxy had not read) and drops whatever the proxy holds for them.
// It returns how many connections it closed (counted in Stats.Resets).
func (p *Proxy) Reset() int {
	p.mu.Lock()
	conns := p.connList()
	for _, c := range conns {
		c.broken = true
	}
	p.mu.Unlock()
	n := 0
	for _, c := range conns {
		if c.close(true) {
			n++
		}
	}
	p.resets.Add(int64(n))
	return n
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	open := len(p.conns)
	p.mu.Unlock()
	return Stats{
		Accepted:   p.accepted.Load(),
		Open:       open,
		BytesUp:    p.bytesUp.Load(),
		BytesDown:  p.bytesDown.Load(),
		Resets:     p.resets.Load(),
		Refused:    p.refused.Load(),
		DialErrors: p.dialErrors.Load(),
		Discarded:  p.discarded.Load(),
	}
}

// Labels returns the sorted distinct non-empty labels of the open
// connections (see Options.LabelHeader).
func (p *Proxy) Labels() []string {
	p.mu.Lock()
	var ls []string
	for c := range p.conns {
		if c.label != "" {
			ls = append(ls, c.label)
		}
	}
	p.mu.Unlock()
	slices.Sort(ls)
	return slices.Compact(ls)
}

// connList returns the open connections; p.mu is held.
func (p *Proxy) connList() []*conn {
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: try again shortly.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		id := p.accepted.Add(1)
		p.mu.Lock()
		refuse := p.faults.Refuse
		p.mu.Unlock()
		if refuse {
			p.refused.Add(1)
			abort(client)
			continue
		}
		p.wg.Add(1)
		go p.handle(client, uint64(id))
	}
}

// abort closes nc abruptly: a TCP peer gets a reset.
func abort(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
}
