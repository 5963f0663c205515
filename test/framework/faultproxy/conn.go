package faultproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
)

// queueLen is how many chunks a direction holds before its reading pauses.
const queueLen = 64

// conn is one proxied connection: the accepted client side and the dialed
// target side.
type conn struct {
	p              *Proxy
	client, target net.Conn
	done           chan struct{} // closed when the connection is closed
	once           sync.Once
	ended          atomic.Int32 // directions whose end of stream was delivered

	// Guarded by p.mu.
	label  string
	broken bool      // being reset: deliver nothing more
	lost   Direction // directions that discarded bytes (Blackhole)
}

// handle dials the target for an accepted client, labels the connection
// and starts its pumps.
func (p *Proxy) handle(client net.Conn, id uint64) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	target, err := d.DialContext(p.ctx, p.opts.Network, p.opts.Target)
	if err != nil {
		if p.ctx.Err() == nil {
			p.dialErrors.Add(1)
		}
		_ = client.Close()
		return
	}
	c := &conn{p: p, client: client, target: target, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		_ = target.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()

	var up io.Reader = client
	if h := p.opts.LabelHeader; h != "" {
		label, pending, err := peekLabel(client, h)
		p.mu.Lock()
		c.label = label
		p.mu.Unlock()
		up = &prefixReader{pending: pending, err: err, r: client}
	}
	select {
	case <-c.done:
		return
	default:
	}
	upQ := make(chan chunk, queueLen)
	downQ := make(chan chunk, queueLen)
	seed := p.opts.Seed
	p.wg.Add(4)
	go p.read(c, up, upQ, rand.New(rand.NewPCG(seed, id<<1)))
	go p.write(c, Up, upQ, target, &p.bytesUp)
	go p.read(c, target, downQ, rand.New(rand.NewPCG(seed, id<<1|1)))
	go p.write(c, Down, downQ, client, &p.bytesDown)
}

// close closes both sides (abruptly when abort) and forgets the connection;
// it reports whether this call closed it.
func (c *conn) close(abortIt bool) bool {
	closed := false
	c.once.Do(func() {
		closed = true
		close(c.done)
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
		if abortIt {
			abort(c.client)
			abort(c.target)
		} else {
			_ = c.client.Close()
			_ = c.target.Close()
		}
	})
	return closed
}

// endDirection records that one direction delivered its end of stream and
// closes the connection once both did.
func (c *conn) endDirection() {
	if c.ended.Add(1) == 2 {
		c.close(false)
	}
}

// closeWrite half-closes nc (TCP and unix sockets both support it).
func closeWrite(nc net.Conn) error {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nc.Close()
}
