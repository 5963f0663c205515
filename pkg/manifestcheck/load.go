// Package manifestcheck judges a set of manifests with the admission rules
// of pkg/validation, as if the set were applied together: every object is
// checked against all the others, and optionally against a live cluster
// (the set wins for the objects it defines). It is `snapctl validate`
// (docs/snapctl.md) without the command line.
package manifestcheck

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/manifest"
)

// Stdin is the path that reads standard input.
const Stdin = "-"

// Object is one decoded object and where it came from: document Document
// (from 1) of File, item Item (from 1) when that document is a List.
type Object struct {
	File     string
	Document int
	Item     int
	Obj      metav1.Object
}

// Where is "file:document", or "file:document.item" for a List item.
func (o Object) Where() string {
	if o.Item > 0 {
		return fmt.Sprintf("%s:%d.%d", o.File, o.Document, o.Item)
	}
	return fmt.Sprintf("%s:%d", o.File, o.Document)
}

// Loaded is what Load read: the objects of known kinds, and one note for
// every document of another kind (they are skipped).
type Loaded struct {
	Objects []Object
	Notes   []string
}

// Load reads files, directories (recursively: *.yaml, *.yml and *.json)
// and, for "-", stdin. A file named explicitly is read whatever its name.
// A file read twice through overlapping paths counts once. Any unreadable
// or undecodable input is an error: CI must not pass what it did not read.
func Load(paths []string, stdin io.Reader) (*Loaded, error) {
	l := &Loaded{}
	seen := map[string]bool{}
	for _, root := range paths {
		if root == Stdin {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading stdin: %w", err)
			}
			if err := l.add("<stdin>", data); err != nil {
				return nil, err
			}
			continue
		}
		if err := filepath.WalkDir(root, l.walker(root, seen)); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *Loaded) walker(root string, seen map[string]bool) fs.WalkDirFunc {
	return func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		clean := filepath.Clean(path)
		if d.IsDir() || seen[clean] || (path != root && !isManifest(path)) {
			return nil
		}
		seen[clean] = true
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		return l.add(path, data)
	}
}

func isManifest(path string) bool {
	switch filepath.Ext(path) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// add decodes the documents of one file.
func (l *Loaded) add(file string, data []byte) error {
	docs, err := manifest.ReadAll(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, d := range docs {
		o := Object{File: file, Document: d.Index, Item: d.Item}
		obj, err := manifest.Decode(d.Raw)
		if errors.Is(err, manifest.ErrUnsupportedKind) {
			l.Notes = append(l.Notes, fmt.Sprintf("%s: ignored: %v", o.Where(), err))
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", o.Where(), err)
		}
		o.Obj = obj
		l.Objects = append(l.Objects, o)
	}
	return nil
}
