package selfcert

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// writeFiles installs tls.key, tls.crt and ca.crt into dir, each by write
// and rename so that a reader never sees half a file, and skips files that
// are already current (a rewrite would make the server reload for nothing).
// The key goes first: a server that reloads between the two sees a pair that
// does not match, rejects it and keeps the old one until tls.crt follows.
func writeFiles(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{KeyKey, 0o600}, {KeyCert, 0o644}, {KeyCA, 0o644}} {
		want, ok := data[f.name]
		if !ok {
			continue
		}
		path := filepath.Join(dir, f.name)
		if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+f.name+".*")
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		_, werr := tmp.Write(want)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), f.mode)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), path)
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", path, werr)
		}
	}
	return nil
}
