package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestPassThrough(t *testing.T) {
	forNetworks(t, func(t *testing.T, network string) {
		_, p, c := echoThrough(t, network, Options{}, "hello")
		data := pattern(1 << 20)
		transfer(t, c, data, 10*time.Second)

		// Half-close: the client's EOF reaches the echo server, whose
		// own EOF after the echo reaches the client.
		write(t, c, "last words")
		if err := closeWrite(c); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, err := io.ReadAll(c)
		if err != nil || string(rest) != "last words" {
			t.Fatalf("after half-close read %q, %v", rest, err)
		}
		waitFor(t, 2*time.Second, "the connection to close", func() bool { return p.Stats().Open == 0 })
		st := p.Stats()
		want := int64(len("hello") + len(data) + len("last words"))
		if st.Accepted != 1 || st.BytesUp != want || st.BytesDown != want {
			t.Fatalf("stats %+v, want 1 accepted and %d bytes each way", st, want)
		}
	})
}

func TestLatency(t *testing.T) {
	_, p, c := echoThrough(t, "tcp", Options{}, "warm")
	p.Set(Faults{Latency: 100 * time.Millisecond})
	if d := roundTrip(t, c, "ping"); d < 200*time.Millisecond || d >= time.Second {
		t.Fatalf("round trip took %v with 100ms latency each way", d)
	}

	// Order holds under jitter: many small writes, each its own chunk.
	p.Set(Faults{Latency: time.Millisecond, Jitter: 40 * time.Millisecond})
	var want bytes.Buffer
	done := make(chan error, 1)
	go func() {
		for i := range 100 {
			msg := fmt.Sprintf("<%03d>", i)
			want.WriteString(msg)
			if _, err := c.Write([]byte(msg)); err != nil {
				done <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
		done <- nil
	}()
	got := readN(t, c, 500, 5*time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatalf("reordered under jitter:\n got %s\nwant %s", got, want.String())
	}
}

func TestStall(t *testing.T) {
	forNetworks(t, func(t *testing.T, network string) {
		e, p, c1 := echoThrough(t, network, Options{}, "before")
		p.Set(Faults{Stall: true})
		data := pattern(256 << 10)
		werr := make(chan error, 1)
		go func() {
			_, err := c1.Write(data)
			werr <- err
		}()
		c2 := dial(t, p) // accepted and dialed, but stalled
		write(t, c2, "new")
		expectNothing(t, c1, 300*time.Millisecond)
		expectNothing(t, c2, 10*time.Millisecond)
		if e.received.Load() != int64(len("before")) {
			t.Fatalf("the target received %d bytes during the stall", e.received.Load()-int64(len("before")))
		}
		if st := p.Stats(); st.Open != 2 {
			t.Fatalf("stats %+v during the stall, want 2 open connections", st)
		}
		p.Set(Faults{})
		if got := readN(t, c1, len(data), 5*time.Second); !bytes.Equal(got, data) {
			t.Fatal("bytes held by the stall arrived changed")
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if got := readN(t, c2, 3, 2*time.Second); string(got) != "new" {
			t.Fatalf("new connection got %q", got)
		}
		roundTrip(t, c1, "after")
	})
}

func TestStallHoldsDelayedChunk(t *testing.T) {
	// A chunk already read and waiting for its latency is held by a stall
	// that begins meanwhile.
	e := startEcho(t, "tcp")
	p := startProxy(t, "tcp", e.addr, Options{})
	p.Set(Faults{Latency: 150 * time.Millisecond})
	c := dial(t, p)
	write(t, c, "x")
	time.Sleep(50 * time.Millisecond)
	p.Set(Faults{Latency: 150 * time.Millisecond, Stall: true})
	time.Sleep(250 * time.Millisecond)
	if n := e.received.Load(); n != 0 {
		t.Fatalf("target received %d bytes during the stall", n)
	}
	p.Set(Faults{})
	readN(t, c, 1, 2*time.Second)
}

func TestBlackholeUp(t *testing.T) {
	forNetworks(t, func(t *testing.T, network string) {
		e, p, c := echoThrough(t, network, Options{}, "ok")
		p.Set(Faults{Blackhole: Up})
		write(t, c, "lost")
		waitFor(t, 2*time.Second, "discarded bytes", func() bool { return p.Stats().Discarded == 4 })
		expectNothing(t, c, 100*time.Millisecond)
		if n := e.received.Load(); n != 2 {
			t.Fatalf("target received %d bytes, want only the first 2", n)
		}
		p.Set(Faults{})
		expectReset(t, c, network, "the blackhole", time.Second)
		if st := p.Stats(); st.Resets != 1 || st.Open != 0 {
			t.Fatalf("stats %+v, want 1 reset and nothing open", st)
		}
		roundTrip(t, dial(t, p), "new")
	})
}

func TestBlackholeDown(t *testing.T) {
	e, p, c := echoThrough(t, "tcp", Options{}, "")
	p.Set(Faults{Blackhole: Down})
	write(t, c, "abc")
	waitFor(t, 2*time.Second, "discarded bytes", func() bool { return p.Stats().Discarded == 3 })
	if n := e.received.Load(); n != 3 {
		t.Fatalf("target received %d bytes, want 3", n)
	}
	// Still blackholed down: no reset while Both covers Down.
	p.Set(Faults{Blackhole: Both})
	if p.Stats().Open != 1 {
		t.Fatal("connection reset while its direction stays blackholed")
	}
	p.Set(Faults{})
	expectClosed(t, c, time.Second)
}

func TestReset(t *testing.T) {
	forNetworks(t, func(t *testing.T, network string) {
		_, p, c := echoThrough(t, network, Options{}, "hi")
		start := time.Now()
		if n := p.Reset(); n != 1 {
			t.Fatalf("Reset closed %d connections, want 1", n)
		}
		expectReset(t, c, network, "Reset", time.Second)
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("reset noticed after %v", d)
		}
		if st := p.Stats(); st.Resets != 1 || st.Open != 0 {
			t.Fatalf("stats %+v, want 1 reset, nothing open", st)
		}
		roundTrip(t, dial(t, p), "again")
	})
}

func TestRefuse(t *testing.T) {
	forNetworks(t, func(t *testing.T, network string) {
		_, p, open := echoThrough(t, network, Options{}, "kept")
		p.Set(Faults{Refuse: true})
		start := time.Now()
		// The reset may even beat the end of the client's connect.
		if c, err := net.DialTimeout(network, p.Addr(), time.Second); err == nil {
			expectClosed(t, c, time.Second)
			c.Close()
		} else if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial: %v, want a connection or a reset", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("refused connection closed after %v", d)
		}
		if st := p.Stats(); st.Refused != 1 {
			t.Fatalf("stats %+v, want 1 refused", st)
		}
		roundTrip(t, open, "still")
		p.Set(Faults{})
		roundTrip(t, dial(t, p), "through")
	})
}

func TestLabels(t *testing.T) {
	type seen struct {
		method, path, from, body string
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.RequestURI(), r.Header.Get("X-Server-From"), string(body)})
		mu.Unlock()
		fmt.Fprintf(w, "hello %s", r.Header.Get("X-Server-From"))
	}))
	defer srv.Close()
	p := startProxy(t, "tcp", srv.Listener.Addr().String(), Options{LabelHeader: "X-Server-From"})

	// One client (and so one connection) per label.
	clients := map[string]*http.Client{}
	for _, l := range []string{"abc", "def"} {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		clients[l] = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	}
	do := func(label string) (string, error) {
		req, err := http.NewRequest("POST", "http://"+p.Addr()+"/raft/stream?x=1", strings.NewReader("payload-"+label))
		if err != nil {
			return "", err
		}
		req.Header.Set("X-Server-From", label)
		resp, err := clients[label].Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, l := range []string{"abc", "def"} {
		if body, err := do(l); err != nil || body != "hello "+l {
			t.Fatalf("request %s: %q, %v", l, body, err)
		}
	}
	mu.Lock()
	want := []seen{{"POST", "/raft/stream?x=1", "abc", "payload-abc"}, {"POST", "/raft/stream?x=1", "def", "payload-def"}}
	if !slices.Equal(got, want) {
		t.Fatalf("server saw %+v, want %+v", got, want)
	}
	mu.Unlock()
	if l := p.Labels(); !slices.Equal(l, []string{"abc", "def"}) {
		t.Fatalf("labels %q", l)
	}

	p.Set(Faults{StallLabels: []string{"abc"}})
	stalled := make(chan error, 1)
	go func() {
		body, err := do("abc")
		if err == nil && body != "hello abc" {
			err = fmt.Errorf("body %q", body)
		}
		stalled <- err
	}()
	if body, err := do("def"); err != nil || body != "hello def" {
		t.Fatalf("request def during abc's stall: %q, %v", body, err)
	}
	select {
	case err := <-stalled:
		t.Fatalf("request abc went through its stall: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.Set(Faults{})
	waitNoError(t, stalled, 3*time.Second, "request abc to complete after the stall")
	if st := p.Stats(); st.Accepted != 2 {
		t.Fatalf("stats %+v, want the 2 connections reused", st)
	}
}

func TestLabelNotHTTP(t *testing.T) {
	// Bytes that are not an HTTP request are labeled "" at once and
	// forwarded unchanged.
	_, p, c := echoThrough(t, "tcp", Options{LabelHeader: "X-Server-From"}, "")
	if d := roundTrip(t, c, "\x16\x03\x01 not http"); d > time.Second {
		t.Fatalf("took %v", d)
	}
	if l := p.Labels(); len(l) != 0 {
		t.Fatalf("labels %q", l)
	}
	// An HTTP request line followed by a header block split over writes.
	c2 := dial(t, p)
	write(t, c2, "GET / HTTP/1.1\r\nHost: x\r\n")
	time.Sleep(20 * time.Millisecond)
	msg := "X-Server-From: split\r\n\r\n"
	write(t, c2, msg)
	readN(t, c2, len("GET / HTTP/1.1\r\nHost: x\r\n")+len(msg), 2*time.Second)
	if l := p.Labels(); !slices.Equal(l, []string{"split"}) {
		t.Fatalf("labels %q", l)
	}
}

func TestSpikeAndBandwidth(t *testing.T) {
	_, p, c := echoThrough(t, "tcp", Options{Seed: 1}, "warm")
	p.Set(Faults{SpikeProb: 1, Spike: 200 * time.Millisecond})
	if d := roundTrip(t, c, "spike"); d < 400*time.Millisecond || d >= time.Second {
		t.Fatalf("round trip took %v with a 200ms spike each way", d)
	}
	p.Set(Faults{SpikeProb: 0, Spike: time.Hour})
	if d := roundTrip(t, c, "nospike"); d >= 200*time.Millisecond {
		t.Fatalf("round trip took %v with spike probability 0", d)
	}

	p.Set(Faults{Bandwidth: 64 << 10})
	start := time.Now()
	transfer(t, c, pattern(32<<10), 5*time.Second)
	if d := time.Since(start); d < 400*time.Millisecond || d > 3*time.Second {
		t.Fatalf("32 KiB at 64 KiB/s took %v", d)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	forNetworks(t, func(t *testing.T, network string) {
		e := startEcho(t, network)
		before := runtime.NumGoroutine()
		p := startProxy(t, network, e.addr, Options{LabelHeader: "X-Server-From"})
		var conns []net.Conn
		for range 3 {
			c := dial(t, p)
			roundTrip(t, c, "GET / HTTP/1.1\r\nX-Server-From: a\r\n\r\n")
			conns = append(conns, c)
		}
		p.Set(Faults{Stall: true, Latency: time.Hour})
		for _, c := range conns {
			go c.Write(pattern(1 << 20)) // fills buffers; ends when c is closed
		}
		half := dial(t, p) // in the middle of its label peek
		_, _ = half.Write([]byte("GET / HT"))
		waitFor(t, time.Second, "4 open connections", func() bool { return p.Stats().Open == 4 })

		closed := make(chan error, 1)
		go func() { closed <- p.Close() }()
		waitNoError(t, closed, 3*time.Second, "Close to return")
		p.wg.Wait() // returns: Close waited for it
		for _, c := range conns {
			expectClosed(t, c, time.Second)
			c.Close()
		}
		half.Close()
		if _, err := net.DialTimeout(network, p.Addr(), time.Second); err == nil {
			t.Fatal("still accepting after Close")
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		waitFor(t, 2*time.Second, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	})
}

func TestDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := startProxy(t, "tcp", addr, Options{})
	expectClosed(t, dial(t, p), 2*time.Second)
	waitFor(t, time.Second, "a dial error", func() bool { return p.Stats().DialErrors == 1 })
}

func TestDirectionString(t *testing.T) {
	for d, s := range map[Direction]string{None: "none", Up: "up", Down: "down", Both: "both", 7: "Direction(7)"} {
		if d.String() != s {
			t.Errorf("%d: %q", int(d), d.String())
		}
	}
}

func TestResetDuringStall(t *testing.T) {
	_, p, c := echoThrough(t, "tcp", Options{}, "hi")
	p.Set(Faults{Stall: true})
	werr := make(chan error, 1)
	go func() { // held by the stall; ends when c is reset
		_, err := c.Write(pattern(8 << 20))
		werr <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if n := p.Reset(); n != 1 {
		t.Fatalf("Reset closed %d connections, want 1", n)
	}
	// The reset is reported once, to the read or to the write in progress.
	rerr := expectClosed(t, c, time.Second)
	if err := <-werr; !errors.Is(rerr, syscall.ECONNRESET) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v, write: %v, want ECONNRESET", rerr, err)
	}
	p.Set(Faults{})
	roundTrip(t, dial(t, p), "healed")
}
