package framework

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Service stands in for a Kubernetes Service in front of replicas on
// loopback (this API server has no Service routing): a TCP listener that
// hands each new connection to the next endpoint, round robin, as
// kube-proxy does. A connection stays with its endpoint until either side
// closes it; removing an endpoint leaves its open connections alone, as
// conntrack does. With no endpoint a connection is closed at once (a
// Service without ready endpoints refuses).
type Service struct {
	Addr string

	ln        net.Listener
	mu        sync.Mutex
	endpoints []string
	next      int
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// StartService listens on a free loopback port; t.Cleanup closes the
// listener and every connection.
func StartService(t T) *Service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	s := &Service{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// SetEndpoints replaces the endpoints new connections go to.
func (s *Service) SetEndpoints(addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = append([]string(nil), addrs...)
}

// Endpoints are the endpoints new connections go to.
func (s *Service) Endpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.endpoints...)
}

// Close stops accepting and closes every open connection.
func (s *Service) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Service) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go s.forward(c)
	}
}

func (s *Service) pick() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.endpoints) == 0 {
		return ""
	}
	s.next = (s.next + 1) % len(s.endpoints)
	return s.endpoints[s.next]
}

// track adds (open) or removes conns from the set Close closes; adding
// fails once the Service is closed.
func (s *Service) track(open bool, conns ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open && s.closed {
		return false
	}
	for _, c := range conns {
		if open {
			s.conns[c] = struct{}{}
		} else {
			delete(s.conns, c)
		}
	}
	return true
}

// forward pipes c to an endpoint in both directions until either side
// closes.
func (s *Service) forward(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	addr := s.pick()
	if addr == "" {
		return
	}
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !s.track(true, c, up) {
		return
	}
	defer s.track(false, c, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close first so a response in flight still gets through.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}
