package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
	"time"
)

func tgz(t *testing.T, mtime time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.ModTime = mtime
	tw := tar.NewWriter(zw)
	for _, f := range []string{"snapkeeper/Chart.yaml", "snapkeeper/values.yaml"} {
		if err := tw.WriteHeader(&tar.Header{Name: f, Mode: 0o644, Size: 2, ModTime: mtime, Uname: "me"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestNormalizeTgz(t *testing.T) {
	epoch := time.Unix(1700000000, 0).UTC()
	a, err := normalizeTgz(tgz(t, time.Now()), epoch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := normalizeTgz(tgz(t, time.Now().Add(time.Hour)), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two packagings, two tarballs")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	eachTarEntry(t, zr, func(h *tar.Header, _ io.Reader) {
		n++
		if !h.ModTime.Equal(epoch) || h.Uname != "" {
			t.Errorf("%s: %v %q", h.Name, h.ModTime, h.Uname)
		}
	})
	if n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

// eachTarEntry calls fn with every entry of the tar stream r (walkTar); a
// broken stream fails the test.
func eachTarEntry(t *testing.T, r io.Reader, fn func(h *tar.Header, content io.Reader)) {
	t.Helper()
	err := walkTar(r, func(h *tar.Header, content io.Reader) error {
		fn(h, content)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
