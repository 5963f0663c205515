package faults

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// The webhook's server negotiates HTTP/2 with any client that offers it
// (the API server itself does for a webhook on a loopback address, and
// speaks HTTP/1.1 to one behind a Service), so the hostile clients also
// come over HTTP/2, where other limits apply: the preface timeout of
// net/http's HTTP/2 server instead of readHeaderTimeout, and readTimeout
// per stream instead of per connection.

// h2PrefaceTimeout is how long net/http's HTTP/2 server waits for the
// client's preface after the handshake (not configurable).
const h2PrefaceTimeout = 10 * time.Second

// idleH2 completes a handshake that negotiates HTTP/2 and sends nothing,
// not even the preface.
func (h *hostile) idleH2(ctx context.Context) cut {
	c := cut{kind: "idle after an HTTP/2 handshake, no preface", expect: h2PrefaceTimeout, want: []int{closedNoAnswer}}
	cfg := h.tls.Clone()
	cfg.NextProtos = []string{"h2"}
	h.dials <- struct{}{}
	conn, err := (&tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second}, Config: cfg}).DialContext(ctx, "tcp", h.addr)
	<-h.dials
	if err != nil {
		c.err = err
		return c
	}
	defer conn.Close()
	if p := conn.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != "h2" {
		c.err = fmt.Errorf("the webhook negotiated %q, not h2", p)
		return c
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(c.expect + grace))
	// The server's SETTINGS frame may come first; then the close.
	br := bufio.NewReader(conn)
	var ne net.Error
	for {
		if _, err = br.Discard(1); err != nil {
			break
		}
	}
	c.after = time.Since(start)
	if errors.As(err, &ne) && ne.Timeout() {
		c.err = fmt.Errorf("still open after %v", c.after.Round(time.Millisecond))
	}
	return c
}

// slowBodyH2 is slowBody over HTTP/2: one stream declaring 64 KiB and
// trickling it a byte every 100 ms.
func (h *hostile) slowBodyH2(ctx context.Context) cut {
	c := cut{kind: "slow body over HTTP/2 (a byte / 100 ms)", expect: bodyTimeout, want: []int{http.StatusRequestTimeout}}
	tr := &http.Transport{TLSClientConfig: h.tls.Clone(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	stop := make(chan struct{})
	defer close(stop)
	ctx, cancel := context.WithTimeout(ctx, c.expect+grace)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+h.addr+"/validate/volumesnapshotclasses", dripReader{stop})
	if err != nil {
		c.err = err
		return c
	}
	req.ContentLength = 64 << 10
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	c.after = time.Since(start)
	switch {
	case ctx.Err() != nil:
		c.err = fmt.Errorf("still open after %v", c.after.Round(time.Millisecond))
	case err != nil: // reset without an answer: status stays closedNoAnswer
		c.msg = err.Error()
	case resp.ProtoMajor != 2:
		c.err = fmt.Errorf("the webhook answered over %s, not HTTP/2", resp.Proto)
	default:
		c.status, c.msg = resp.StatusCode, answerMessage(resp)
	}
	return c
}

// dripReader yields a byte every 100 ms until stop.
type dripReader struct{ stop <-chan struct{} }

func (r dripReader) Read(p []byte) (int, error) {
	select {
	case <-r.stop:
		return 0, errors.New("stopped")
	case <-time.After(100 * time.Millisecond):
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = 'x'
	return 1, nil
}
