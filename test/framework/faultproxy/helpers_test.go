package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every connection until EOF, then half-closes it; it
// counts the bytes it received.
type echoServer struct {
	addr     string
	received atomic.Int64
	ln       net.Listener
	wg       sync.WaitGroup
}

func startEcho(t *testing.T, network string) *echoServer {
	t.Helper()
	var ln net.Listener
	var err error
	if network == "unix" {
		ln, err = net.Listen("unix", filepath.Join(shortDir(t), "echo.sock"))
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: ln.Addr().String(), ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						if errors.Is(err, io.EOF) {
							_ = closeWrite(c)
						}
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.wg.Wait()
	})
	return e
}

// shortDir is a temporary directory with a path short enough for a unix
// socket.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "fp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startProxy starts a proxy of network in front of target; the test's
// cleanup closes it.
func startProxy(t *testing.T, network, target string, o Options) *Proxy {
	t.Helper()
	o.Network, o.Target = network, target
	if network == "unix" {
		o.Listen = filepath.Join(shortDir(t), "proxy.sock")
	} else {
		o.Listen = "127.0.0.1:0"
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout(p.opts.Network, p.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readN reads exactly n bytes within d.
func readN(t *testing.T, c net.Conn, n int, d time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// roundTrip writes msg and reads its echo, returning how long it took.
func roundTrip(t *testing.T, c net.Conn, msg string) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len(msg), 5*time.Second); string(got) != msg {
		t.Fatalf("echo %q, want %q", got, msg)
	}
	return time.Since(start)
}

// expectNothing checks that nothing arrives on c within d.
func expectNothing(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 1)
	n, err := c.Read(b)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes (%v), want a timeout with nothing", n, err)
	}
}

// expectClosed checks that a read on c fails (a reset or EOF) within d and
// returns the error.
func expectClosed(t *testing.T, c net.Conn, d time.Duration) error {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 64)
	for {
		_, err := c.Read(b)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection still open after %v", d)
		}
		return err
	}
}

// pattern returns n bytes that reveal any reordering or loss.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// transfer sends data through c while reading its echo and returns the echo.
func transfer(t *testing.T, c net.Conn, data []byte, d time.Duration) []byte {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		errc <- err
	}()
	got := readN(t, c, len(data), d)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo of %d bytes differs", len(data))
	}
	return got
}

var networks = []string{"tcp", "unix"}

// forNetworks runs f as a subtest for each network the proxy serves.
func forNetworks(t *testing.T, f func(t *testing.T, network string)) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) { f(t, network) })
	}
}

// echoThrough starts an echo server and a proxy of network with options o
// in front of it, and dials the proxy; a hello that is not empty makes a
// first round trip, so that the connection is known to be through before a
// test sets its faults.
func echoThrough(t *testing.T, network string, o Options, hello string) (*echoServer, *Proxy, net.Conn) {
	t.Helper()
	e := startEcho(t, network)
	p := startProxy(t, network, e.addr, o)
	c := dial(t, p)
	if hello != "" {
		roundTrip(t, c, hello)
	}
	return e, p, c
}

// write writes msg to c.
func write(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// expectReset checks that c is closed within d and, over TCP, by a reset;
// after says what should have ended it.
func expectReset(t *testing.T, c net.Conn, network, after string, d time.Duration) {
	t.Helper()
	err := expectClosed(t, c, d)
	if network == "tcp" && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after %s: %v, want ECONNRESET", after, err)
	}
}

// waitNoError waits up to d for what to report on errc, and fails the
// test if it reports an error or nothing.
func waitNoError(t *testing.T, errc <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
}
