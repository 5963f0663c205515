package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

const (
	// maxPeek bounds the bytes peeked for a label.
	maxPeek = 16 << 10
	// peekTimeout bounds the time spent waiting for them.
	peekTimeout = 2 * time.Second
	// maxMethod bounds the length of an HTTP method.
	maxMethod = 32
)

// peekLabel reads the first bytes of nc, up to the end of the first HTTP
// request's header block, and returns the value of its header named header
// ("" when they are not an HTTP request, have no such header or do not end
// their header block within maxPeek bytes or peekTimeout). The bytes read
// are returned in pending, to be forwarded; err is a read error other than
// the timeout, to be reported after them.
func peekLabel(nc net.Conn, header string) (label string, pending []byte, err error) {
	_ = nc.SetReadDeadline(time.Now().Add(peekTimeout))
	defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 0, maxPeek)
	for len(buf) < cap(buf) {
		n, rerr := nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch end, isHTTP := headerEnd(buf); {
		case !isHTTP:
			return "", buf, keep(rerr)
		case end > 0:
			return headerValue(buf[:end], header), buf, keep(rerr)
		}
		if rerr != nil {
			return "", buf, keep(rerr)
		}
	}
	return "", buf, nil
}

// keep returns err unless it is the peek's own timeout.
func keep(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

// headerEnd looks at the first bytes of a stream: isHTTP is false once they
// cannot start an HTTP request (a method token then a space); end is the
// length of the request line and header block, or 0 if not complete yet.
func headerEnd(b []byte) (end int, isHTTP bool) {
	for i, c := range b {
		if c == ' ' {
			if i == 0 {
				return 0, false
			}
			break
		}
		if i >= maxMethod || !isTokenChar(c) {
			return 0, false
		}
	}
	if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
		return i + 4, true
	}
	if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
		return i + 2, true
	}
	return 0, true
}

// isTokenChar reports whether c may appear in an HTTP token (a method).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

// headerValue parses a request line and header block and returns the value
// of header, or "" if it does not parse.
func headerValue(block []byte, header string) string {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(block)))
	if err != nil {
		return ""
	}
	return req.Header.Get(header)
}

// prefixReader returns pending, then err if set, then reads r.
type prefixReader struct {
	pending []byte
	err     error
	r       io.Reader
}

func (pr *prefixReader) Read(b []byte) (int, error) {
	if len(pr.pending) > 0 {
		n := copy(b, pr.pending)
		pr.pending = pr.pending[n:]
		return n, nil
	}
	if pr.err != nil {
		return 0, pr.err
	}
	return pr.r.Read(b)
}
