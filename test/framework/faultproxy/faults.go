package faultproxy

import (
	"slices"
	"strconv"
	"time"
)

// Faults are the faults a Proxy injects. The zero value injects none: bytes
// are forwarded as they come. Proxy.Set replaces all of them at once and the
// new value applies at once, to the connections already open (including
// bytes the proxy already holds) and to new ones.
//
// The proxy forwards a connection as chunks: each read from one side (at
// most 32 KiB) is one chunk, delivered to the other side by one write or,
// with Bandwidth, by a few smaller ones. Each connection has two directions,
// Up (client to target) and Down (target to client), faulted independently
// of each other and of other connections. Within a direction chunks are
// always delivered in the order they were read, and the end of the stream
// (the side's EOF, forwarded as a CloseWrite) is delivered after every chunk
// read before it, subject to the same faults as a chunk.
type Faults struct {
	// Latency delays every chunk: it is delivered no earlier than the time
	// it was read plus Latency plus a uniform random part in [0, Jitter),
	// and never before an earlier chunk of the same direction (a chunk
	// waiting for its time holds the later ones back, as on a single path).
	// The proxy keeps reading while chunks wait, up to 64 chunks per
	// direction, then reading pauses. The random part is drawn once per
	// chunk when it is read; the delay itself is computed from the faults
	// current while the chunk waits, so lowering Latency releases waiting
	// chunks at once.
	Latency, Jitter time.Duration
	// SpikeProb is the probability (0 to 1) that a chunk additionally waits
	// Spike on top of Latency and Jitter: a heavy tail (e.g. SpikeProb 0.02
	// and Spike 6s put the p99 of a request above 5 s). Drawn once per chunk.
	SpikeProb float64
	Spike     time.Duration
	// Bandwidth limits each direction of each connection to that many bytes
	// per second (0 or less: no limit). Once a chunk's delay is over it is
	// written in pieces of a twentieth of a second's worth (Bandwidth/20
	// bytes, at least 1), each written once its own transmission time has
	// passed since the previous piece went (or since it was ready, if the
	// direction was idle): 32 KiB at 64 KiB/s take half a second. Idle time
	// does not accumulate into a burst.
	Bandwidth int
	// Stall stops forwarding in both directions of every connection. The
	// sockets stay open and nothing is read from either side (bytes wait in
	// the senders' kernel buffers until the senders block, as TCP keeps
	// unacknowledged data across a partition); the chunks the proxy already
	// holds, including one whose read was in progress when the stall began,
	// are held too. Once Stall is cleared everything held is delivered, in
	// order, and reading resumes. New connections are still accepted and
	// their target dialed (and with Options.LabelHeader their first request
	// header is peeked to label them), but nothing of theirs is forwarded.
	// A side that closes its socket during a stall is not noticed until the
	// stall ends, as its FIN would not cross a partition either.
	Stall bool
	// StallLabels stalls, exactly as Stall, only the connections whose label
	// (see Options.LabelHeader) is one of these strings. A connection is
	// labeled before any of its bytes is forwarded, so a label's stall
	// applies from the connection's first byte. The empty string matches
	// the connections whose label is empty (no header, or not HTTP).
	StallLabels []string
	// Blackhole drops the bytes of the given directions: they are read (and
	// delayed as above) and then discarded instead of written, counted in
	// Stats.Discarded; an end of stream in a dropped direction is dropped
	// too. The other direction flows. A connection that lost bytes this way
	// has a broken stream, so when its lost direction stops being
	// blackholed (Set with a Blackhole that no longer covers it) the
	// connection is Reset, as Proxy.Reset does, and counted in Stats.Resets.
	Blackhole Direction
	// Refuse makes every newly accepted connection be closed at once, with
	// nothing read, written or dialed (for TCP abruptly, so the client gets
	// a reset, possibly already as the result of its connect), counted in
	// Stats.Refused. Open connections are untouched.
	Refuse bool
}

// clone returns f with a StallLabels of its own.
func (f Faults) clone() Faults {
	f.StallLabels = slices.Clone(f.StallLabels)
	return f
}

// Direction names directions of a connection; its values are bit sets
// (Both is Up|Down).
type Direction int

const (
	// None is no direction.
	None Direction = iota
	// Up is client to target: what the proxy accepted sends.
	Up
	// Down is target to client: what the proxy dialed sends.
	Down
	// Both is Up and Down.
	Both
)

// String returns "none", "up", "down" or "both".
func (d Direction) String() string {
	switch d {
	case None:
		return "none"
	case Up:
		return "up"
	case Down:
		return "down"
	case Both:
		return "both"
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}
