package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/klog/v2"
)

// fileWatcher re-reads the faults file when its content changes. It polls
// the content rather than watching inotify events, so editors' and tests'
// atomic renames are seen the same way as in-place writes.
type fileWatcher struct {
	path string
	in   *injector
	seen bool   // the file existed at the last check
	last []byte // content at the last check, valid or not
}

func (w *fileWatcher) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.check(); err != nil {
				// Keep the faults that are live; log once per bad content.
				klog.ErrorS(err, "Ignoring invalid faults file", "path", w.path)
			}
		}
	}
}

// check installs the file's faults if its content changed. A file that does
// not exist yet leaves the current faults (from --faults) alone; a file that
// is removed clears them.
func (w *fileWatcher) check() error {
	data, err := os.ReadFile(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		if w.seen {
			w.seen, w.last = false, nil
			w.in.setFaults(Faults{}, "file")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading faults file: %w", err)
	}
	if w.seen && bytes.Equal(data, w.last) {
		return nil
	}
	w.seen, w.last = true, data
	f, err := ParseFaults(data)
	if err != nil {
		return fmt.Errorf("faults file %s: %w", w.path, err)
	}
	w.in.setFaults(f, "file")
	return nil
}
