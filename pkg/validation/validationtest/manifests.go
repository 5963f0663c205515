package validationtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/manifest"
)

// A manifest case is one YAML file under test/testdata/valid or invalid.
// Its leading comment lines carry directives:
//
//	# expect: <substring>           the denial must contain it (invalid/ only;
//	                                repeatable, each must match)
//	# expect-apiserver: <substring> what a real API server answers instead,
//	                                when its built-in or CRD (CEL) validation
//	                                rejects the object before the webhook runs
//	# warn: <substring>             an expected warning (repeatable)
//	# requires: <FeatureGate>       the e2e run needs this API server gate
//	# about: <text>                 what the case shows (ignored, like any
//	                                other comment)
//
// Every document but the last is a prerequisite, admitted and created
// first; the last document is the object under test. When it has the kind,
// namespace and name of a prerequisite, the case is an UPDATE of it.
type Case struct {
	Name, Path      string
	Expect          []string
	ExpectAPIServer string
	Warn            []string
	Requires        []string
	// Docs are the YAML documents in file order.
	Docs [][]byte
}

// Prerequisites are the documents created before the object under test.
func (c Case) Prerequisites() [][]byte { return c.Docs[:len(c.Docs)-1] }

// Object is the document under test.
func (c Case) Object() []byte { return c.Docs[len(c.Docs)-1] }

// LoadCases reads every *.yaml file of dir, sorted by name.
func LoadCases(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	cases := make([]Case, 0, len(paths))
	for _, p := range paths {
		c, err := LoadCase(p)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// LoadCase reads one case file.
func LoadCase(path string) (Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Case{}, err
	}
	c := Case{Name: strings.TrimSuffix(filepath.Base(path), ".yaml"), Path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#") {
			break
		}
		key, val, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ":")
		val = strings.TrimSpace(val)
		switch {
		case !ok:
		case key == "expect":
			c.Expect = append(c.Expect, val)
		case key == "expect-apiserver":
			c.ExpectAPIServer = val
		case key == "warn":
			c.Warn = append(c.Warn, val)
		case key == "requires":
			c.Requires = append(c.Requires, val)
		}
	}
	if c.Docs, err = SplitDocuments(data); err != nil {
		return Case{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(c.Docs) == 0 {
		return Case{}, fmt.Errorf("%s: no YAML document", path)
	}
	return c, nil
}

// SplitDocuments splits a multi-document YAML stream (see
// manifest.SplitDocuments).
func SplitDocuments(data []byte) ([][]byte, error) { return manifest.SplitDocuments(data) }

// Decode turns a document into its typed object (see manifest.Decode).
func Decode(doc []byte) (metav1.Object, error) { return manifest.Decode(doc) }

// KeyOf identifies an object by kind, namespace and name.
func KeyOf(obj metav1.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}
