package validationtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A Set is a directory of test/testdata/sets: manifests judged together,
// and outcome.txt naming the objects that must be denied (see the README
// there). Every other object must be admitted.
type Set struct {
	Name, Dir string
	// Denied maps "Kind namespace/name" (or "Kind name") to the fields
	// the denial must name.
	Denied map[string][]string
}

// LoadSets reads every set under dir, sorted by name.
func LoadSets(dir string) ([]Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading sets: %w", err)
	}
	var sets []Set
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		s := Set{Name: e.Name(), Dir: filepath.Join(dir, e.Name()), Denied: map[string][]string{}}
		data, err := os.ReadFile(filepath.Join(s.Dir, "outcome.txt"))
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if len(f) < 2 {
				return nil, fmt.Errorf("set %s: outcome line %q: want Kind name [field...]", s.Name, sc.Text())
			}
			key := f[0] + " " + f[1]
			s.Denied[key] = append(s.Denied[key], f[2:]...)
		}
		sets = append(sets, s)
	}
	return sets, nil
}

// SetKey is the key of Set.Denied for an object.
func SetKey(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
