package faults

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The server's timeouts (pkg/admission/server.go) that should end each
// hostile connection.
const (
	// headerTimeout is readHeaderTimeout, which also bounds the TLS
	// handshake (net/http uses the smallest of the read and write timeouts).
	headerTimeout = 5 * time.Second
	// bodyTimeout is readTimeout: the whole request, body included.
	bodyTimeout = 15 * time.Second
	// keepAliveTimeout is idleTimeout: between requests on one connection.
	keepAliveTimeout = 90 * time.Second
	// grace: a hostile connection still open this long after the timeout
	// that should have ended it is a failure.
	grace = 30 * time.Second
)

// closedNoAnswer is the status of a connection the server closed without
// an HTTP answer.
const closedNoAnswer = 0

// cut is what the server did to one hostile connection.
type cut struct {
	kind   string
	expect time.Duration // the timeout that should end it; 0: an answer at once
	want   []int         // the HTTP statuses wanted (closedNoAnswer: a close)
	after  time.Duration // from its first byte (or the dial) to the answer or the close
	status int           // the HTTP status answered, or closedNoAnswer
	msg    string        // the answer's message
	err    error         // still open past expect+grace, or the client failed
}

// hostile opens the bad connections, at most 32 dials at a time (the
// listen backlog is not what is under test).
type hostile struct {
	addr  string
	tls   *tls.Config
	hc    *http.Client
	dials chan struct{}
}

func newHostile(wh *framework.Webhook) *hostile {
	hc := wh.Client()
	return &hostile{addr: wh.Addr, tls: hc.Transport.(*http.Transport).TLSClientConfig, hc: hc, dials: make(chan struct{}, 32)}
}

// dial opens a TCP connection and, unless raw, completes the TLS handshake.
func (h *hostile) dial(ctx context.Context, raw bool) (net.Conn, error) {
	h.dials <- struct{}{}
	defer func() { <-h.dials }()
	nd := &net.Dialer{Timeout: 30 * time.Second}
	if raw {
		return nd.DialContext(ctx, "tcp", h.addr)
	}
	return (&tls.Dialer{NetDialer: nd, Config: h.tls}).DialContext(ctx, "tcp", h.addr)
}

const hostileHead = "POST /validate/volumesnapshotclasses HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"

// slowHeaders is slowloris: the request headers a byte every 100 ms, never
// finished. readHeaderTimeout must close the connection.
func (h *hostile) slowHeaders(ctx context.Context) cut {
	c := cut{kind: "slow headers (a byte / 100 ms)", expect: headerTimeout, want: []int{closedNoAnswer}}
	return h.exchange(ctx, c, hostileHead+"X-Slow: ", drip('a'))
}

// slowBody declares a 64 KiB body and trickles it a byte every 100 ms.
// readTimeout must end the request with a clear 408.
func (h *hostile) slowBody(ctx context.Context) cut {
	c := cut{kind: "slow body (64 KiB declared, a byte / 100 ms)", expect: bodyTimeout, want: []int{http.StatusRequestTimeout}}
	return h.exchange(ctx, c, hostileHead+"Content-Length: 65536\r\n\r\n", drip('x'))
}

// declaredTooLarge declares an 8 MiB body (the limit is 7 MiB) and sends it.
func (h *hostile) declaredTooLarge(ctx context.Context) cut {
	c := cut{kind: "8 MiB body, Content-Length", want: []int{http.StatusRequestEntityTooLarge}}
	return h.exchange(ctx, c, hostileHead+fmt.Sprintf("Content-Length: %d\r\n\r\n", 8<<20), bulk(8<<20, false))
}

// chunkedTooLarge sends 8 MiB chunked, without a declared length: 413
// once 7 MiB are read, or 429 if other bodies hold the webhook's budget
// (webhookmemory_test.go).
func (h *hostile) chunkedTooLarge(ctx context.Context) cut {
	c := cut{kind: "8 MiB body, chunked", want: []int{http.StatusRequestEntityTooLarge, http.StatusTooManyRequests}}
	return h.exchange(ctx, c, hostileHead+"Transfer-Encoding: chunked\r\n\r\n", bulk(8<<20, true))
}

// headersTooLarge sends 128 KiB of headers (MaxHeaderBytes is 64 KiB).
func (h *hostile) headersTooLarge(ctx context.Context) cut {
	c := cut{kind: "128 KiB of headers", want: []int{http.StatusRequestHeaderFieldsTooLarge}}
	return h.exchange(ctx, c, hostileHead+"X-Big: "+strings.Repeat("a", 128<<10)+"\r\nContent-Length: 0\r\n\r\n", nil)
}

// drip writes b every 100 ms until stop or a write error.
func drip(b byte) func(io.Writer, <-chan struct{}) error {
	return func(w io.Writer, stop <-chan struct{}) error {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return nil
			case <-tick.C:
				if _, err := w.Write([]byte{b}); err != nil {
					return err
				}
			}
		}
	}
}

// bulk writes n bytes of JSON-ish filler in 32 KiB pieces, chunk-encoded
// if chunked, as fast as the server takes them.
func bulk(n int, chunked bool) func(io.Writer, <-chan struct{}) error {
	piece := []byte(strings.Repeat("x", 32<<10))
	return func(w io.Writer, stop <-chan struct{}) error {
		for sent := 0; sent < n; sent += len(piece) {
			select {
			case <-stop:
				return nil
			default:
			}
			var err error
			if chunked {
				_, err = fmt.Fprintf(w, "%x\r\n%s\r\n", len(piece), piece)
			} else {
				_, err = w.Write(piece)
			}
			if err != nil {
				return err
			}
		}
		if chunked {
			_, err := io.WriteString(w, "0\r\n\r\n")
			return err
		}
		return nil
	}
}

// exchange writes head on a new TLS connection, then feeds it with send
// (both in a goroutine of their own, stopped once the server answers or
// closes), and records which the server did and after how long.
func (h *hostile) exchange(ctx context.Context, c cut, head string, send func(io.Writer, <-chan struct{}) error) cut {
	conn, err := h.dial(ctx, false)
	if err != nil {
		c.err = err
		return c
	}
	defer conn.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(c.expect + grace))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		if _, err := io.WriteString(conn, head); err != nil || send == nil {
			return
		}
		_ = send(conn, stop)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	c.after = time.Since(start)
	var ne net.Error
	switch {
	case err == nil:
		c.status, c.msg = resp.StatusCode, answerMessage(resp)
	case errors.As(err, &ne) && ne.Timeout():
		c.err = fmt.Errorf("still open after %v", c.after.Round(time.Millisecond))
	}
	return c
}

// idleTCP connects and sends nothing, not even a TLS hello.
func (h *hostile) idleTCP(ctx context.Context) cut {
	return h.idle(ctx, cut{kind: "idle TCP, no TLS hello", expect: headerTimeout, want: []int{closedNoAnswer}}, true, false)
}

// idleTLS completes the handshake and sends nothing.
func (h *hostile) idleTLS(ctx context.Context) cut {
	return h.idle(ctx, cut{kind: "idle after the TLS handshake", expect: headerTimeout, want: []int{closedNoAnswer}}, false, false)
}

// idleAfterRequest sends one request, then keeps the connection idle.
func (h *hostile) idleAfterRequest(ctx context.Context) cut {
	return h.idle(ctx, cut{kind: "idle after one kept-alive request", expect: keepAliveTimeout, want: []int{closedNoAnswer}}, false, true)
}

// idle opens a connection, optionally sends one GET /healthz on it, and
// waits for the server to close it; after counts from the dial, or from
// the answer to the request.
func (h *hostile) idle(ctx context.Context, c cut, raw, request bool) cut {
	conn, err := h.dial(ctx, raw)
	if err != nil {
		c.err = err
		return c
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if request {
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n"); err != nil {
			c.err = err
			return c
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			c.err = fmt.Errorf("GET /healthz: %v %v", resp, err)
			return c
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(c.expect + grace))
	_, err = br.ReadByte()
	c.after = time.Since(start)
	var ne net.Error
	switch {
	case err == nil:
		c.err = errors.New("the server sent bytes to an idle connection")
	case errors.As(err, &ne) && ne.Timeout():
		c.err = fmt.Errorf("still open after %v", c.after.Round(time.Millisecond))
	}
	return c
}

// answerMessage is the message of an answer: the review's result, else
// the plain text.
func answerMessage(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var r admissionv1.AdmissionReview
	if json.Unmarshal(b, &r) == nil && r.Response != nil && r.Response.Result != nil {
		return r.Response.Result.Message
	}
	return strings.TrimSpace(string(b))
}

// answers sums up the statuses of cs with one message of each.
func answers(cs []cut) string {
	count := map[int]int{}
	msg := map[int]string{}
	var order []int
	for _, c := range cs {
		if count[c.status] == 0 {
			order = append(order, c.status)
			msg[c.status] = c.msg
		}
		count[c.status]++
	}
	slices.Sort(order)
	var parts []string
	for _, st := range order {
		parts = append(parts, fmt.Sprintf("%d×%d %q", count[st], st, msg[st]))
	}
	return "answered " + strings.Join(parts, ", ")
}

// reportCuts logs, per kind, how many connections the server answered or
// closed and after how long, and fails for one still open or answered
// otherwise than wanted.
func reportCuts(t *testing.T, cuts []cut) {
	t.Helper()
	byKind := map[string][]cut{}
	var kinds []string
	for _, c := range cuts {
		if _, ok := byKind[c.kind]; !ok {
			kinds = append(kinds, c.kind)
		}
		byKind[c.kind] = append(byKind[c.kind], c)
	}
	for _, k := range kinds {
		cs := byKind[k]
		slices.SortFunc(cs, func(a, b cut) int { return int(a.after - b.after) })
		bad := 0
		for _, c := range cs {
			if c.err != nil || !slices.Contains(c.want, c.status) {
				bad++
				if bad <= 3 {
					t.Errorf("%s: status %d (want one of %v) after %v: %v %q", k, c.status, c.want, c.after.Round(time.Millisecond), c.err, c.msg)
				}
			}
		}
		answer := "closed without an answer"
		if cs[0].want[0] != closedNoAnswer {
			answer = answers(cs)
		}
		t.Logf("%-48s %4d connections, %s after %v / %v / %v (min / median / max; server timeout %v), %d otherwise",
			k+":", len(cs), answer, cs[0].after.Round(time.Millisecond), cs[len(cs)/2].after.Round(time.Millisecond),
			cs[len(cs)-1].after.Round(time.Millisecond), cs[0].expect, bad)
	}
}
