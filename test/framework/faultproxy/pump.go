package faultproxy

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"
)

// chunkSize is the most a pump reads at once.
const chunkSize = 32 << 10

// chunk is what a pump read: bytes, or the end of the stream.
type chunk struct {
	data   []byte
	eof    bool
	at     time.Time // when it was read
	jitter float64   // in [0, 1): the part of Faults.Jitter it waits
	spike  float64   // in [0, 1): it waits Faults.Spike if below SpikeProb
}

// due returns when the chunk may be delivered under f.
func (ch *chunk) due(f *Faults) time.Time {
	d := f.Latency
	if f.Jitter > 0 {
		d += time.Duration(ch.jitter * float64(f.Jitter))
	}
	if ch.spike < f.SpikeProb {
		d += f.Spike
	}
	return ch.at.Add(d)
}

// stalledLocked reports whether c is stalled; p.mu is held.
func (p *Proxy) stalledLocked(c *conn) bool {
	return p.faults.Stall || p.stallSet[c.label]
}

// read is the reading half of a direction: it reads src whenever c is not
// stalled and queues what it read, stamped with the time and the random
// draws; at EOF it queues the end of the stream and returns. Any other
// read error closes the connection abruptly.
func (p *Proxy) read(c *conn, src io.Reader, q chan<- chunk, rng *rand.Rand) {
	defer p.wg.Done()
	buf := make([]byte, chunkSize)
	for {
		if !p.waitUnstalled(c) {
			return
		}
		n, err := src.Read(buf)
		ch := chunk{at: time.Now(), jitter: rng.Float64(), spike: rng.Float64()}
		if n > 0 {
			ch.data = append([]byte(nil), buf[:n]...)
			if !c.enqueue(q, ch) {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				ch.data, ch.eof = nil, true
				c.enqueue(q, ch)
				return
			}
			c.close(true)
			return
		}
	}
}

// enqueue queues ch unless the connection closes first.
func (c *conn) enqueue(q chan<- chunk, ch chunk) bool {
	select {
	case q <- ch:
		return true
	case <-c.done:
		return false
	}
}

// waitUnstalled waits until c is not stalled; false if c closed.
func (p *Proxy) waitUnstalled(c *conn) bool {
	for {
		p.mu.Lock()
		stalled := p.stalledLocked(c)
		changed := p.changed
		p.mu.Unlock()
		if !stalled {
			select {
			case <-c.done:
				return false
			default:
				return true
			}
		}
		select {
		case <-changed:
		case <-c.done:
			return false
		}
	}
}

// write is the writing half of direction d: it delivers the queued chunks
// to dst, each when the faults let it, counting the bytes in n.
func (p *Proxy) write(c *conn, d Direction, q <-chan chunk, dst net.Conn, n *atomic.Int64) {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var next time.Time // when the bandwidth lets the next piece go
	for {
		var ch chunk
		select {
		case ch = <-q:
		case <-c.done:
			return
		}
		discard, ok := p.gate(c, d, timer, ch.due)
		if !ok {
			return
		}
		if ch.eof {
			if discard {
				return // the end of the stream is lost with the stream
			}
			if err := closeWrite(dst); err != nil {
				c.close(true)
				return
			}
			c.endDirection()
			return
		}
		data := ch.data
		for len(data) > 0 {
			if discard {
				p.discarded.Add(int64(len(data)))
				break
			}
			start := time.Now()
			if next.After(start) {
				start = next
			}
			piece, until := len(data), time.Time{}
			discard, ok = p.gate(c, d, timer, func(f *Faults) time.Time {
				piece, until = len(data), time.Time{}
				if f.Bandwidth > 0 {
					piece = min(piece, max(f.Bandwidth/20, 1))
					until = start.Add(time.Duration(int64(piece) * int64(time.Second) / int64(f.Bandwidth)))
				}
				return until
			})
			if !ok {
				return
			}
			if discard {
				continue
			}
			if _, err := dst.Write(data[:piece]); err != nil {
				c.close(true)
				return
			}
			n.Add(int64(piece))
			data = data[piece:]
			next = until
		}
	}
}

// gate waits until a chunk (or a piece of one) of direction d may be
// delivered: c not stalled and the time due returns under the current
// faults reached. It then reports whether d is blackholed (the bytes are
// to be discarded, which it records in c.lost, atomically with respect to
// Set), or ok false if c closed or is being reset.
func (p *Proxy) gate(c *conn, d Direction, timer *time.Timer, due func(*Faults) time.Time) (discard, ok bool) {
	for {
		p.mu.Lock()
		if c.broken {
			p.mu.Unlock()
			return false, false
		}
		changed := p.changed
		wait := time.Duration(-1) // until a change
		if !p.stalledLocked(c) {
			wait = time.Until(due(&p.faults))
			if wait <= 0 {
				discard = p.faults.Blackhole&d != 0
				if discard {
					c.lost |= d
				}
				p.mu.Unlock()
				select {
				case <-c.done:
					return false, false
				default:
					return discard, true
				}
			}
		}
		p.mu.Unlock()
		var fire <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-changed:
		case <-fire:
		case <-c.done:
			return false, false
		}
	}
}
