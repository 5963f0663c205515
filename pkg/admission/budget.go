package admission

import (
	"errors"
	"io"
	"sync/atomic"
)

// The threat: anything in the cluster can reach the webhook's port, and
// each request body is held in memory until it is answered, several times
// over while it is read and decoded. Forty concurrent bodies of 6 MiB,
// each under --max-request-bytes, took the webhook to 468 MiB resident,
// past the chart's 256 Mi memory limit: an OOM kill, and every snapshot
// write refused until the restart (test/faults TestWebhookAbuse; 139 MiB
// with this bound). So the bytes of bodies held at once are bounded.
const (
	// DefaultInflightBodyBytes bounds the request-body bytes held at
	// once, across all requests (raised to maxBytes if that is larger, so
	// that one request of the largest size always fits).
	DefaultInflightBodyBytes = 32 << 20
	// freeBodyBytes of every body are not counted against the bound: the
	// API server's reviews of snapshot objects are a few KiB, and they are
	// read and judged even while large bodies hold the whole budget.
	freeBodyBytes = 64 << 10
)

// errBodyBudget ends the read of a body that would take the bytes held
// past the bound.
var errBodyBudget = errors.New("too many request-body bytes held at once")

// bodyBudget counts down the bytes a handler may still hold.
type bodyBudget struct {
	limit int64
	left  atomic.Int64
}

func newBodyBudget(limit int64) *bodyBudget {
	b := &bodyBudget{limit: limit}
	b.left.Store(limit)
	return b
}

func (b *bodyBudget) take(n int64) bool {
	if b.left.Add(-n) < 0 {
		b.left.Add(n)
		return false
	}
	return true
}

func (b *bodyBudget) give(n int64) { b.left.Add(n) }

// budgetedBody counts what is read from r beyond freeBodyBytes against b;
// release gives it back once the request is answered.
type budgetedBody struct {
	r          io.Reader
	b          *bodyBudget
	read, held int64
}

func (r *budgetedBody) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.read += int64(n)
	if over := r.read - freeBodyBytes - r.held; over > 0 {
		if !r.b.take(over) {
			return n, errBodyBudget
		}
		r.held += over
	}
	return n, err
}

func (r *budgetedBody) release() {
	r.b.give(r.held)
	r.held = 0
}
