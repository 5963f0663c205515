package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// runNormalizeTgz rewrites a gzip tarball (the packaged chart) in place
// with every file time set to -epoch and no time in the gzip header, so
// packaging the same commit twice gives the same bytes; the entries, their
// order and their content are kept.
func runNormalizeTgz(args []string) error {
	fs := flag.NewFlagSet("normalize-tgz", flag.ContinueOnError)
	epoch := fs.Int64("epoch", -1, "Commit time in Unix seconds (SOURCE_DATE_EPOCH).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *epoch < 0 || fs.NArg() != 1 {
		return fmt.Errorf("normalize-tgz: want -epoch SECONDS FILE")
	}
	path := fs.Arg(0)
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := normalizeTgz(in, time.Unix(*epoch, 0).UTC())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

func normalizeTgz(in []byte, mtime time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	err = walkTar(zr, func(h *tar.Header, content io.Reader) error {
		h.ModTime, h.AccessTime, h.ChangeTime = mtime, time.Time{}, time.Time{}
		h.Uname, h.Gname, h.Format = "", "", tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.Copy(tw, content)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newTgz is a gzip tarball of the entries as tarBytes lays them out
// (sorted, every time mtime, owner 0, no user names), with no name or time
// in the gzip header: the same inputs give the same bytes, as
// normalizeTgz makes of a tarball helm wrote.
func newTgz(es []entry, mtime time.Time) ([]byte, error) {
	raw, err := tarBytes(es, mtime)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// walkTar calls fn with every entry of the tar stream r: its header and a
// reader of its content; it stops at the first error.
func walkTar(r io.Reader, fn func(h *tar.Header, content io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}
