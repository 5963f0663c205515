package snapscheduler

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Read takes snapscheduler's SnapshotSchedules out of a YAML or JSON
// stream of documents: objects, and Lists of them (kubectl get -o yaml
// writes a List). ignored counts the objects of other kinds.
func Read(r io.Reader) (objs []*unstructured.Unstructured, ignored int, err error) {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for n := 1; ; n++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return objs, ignored, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, 0, fmt.Errorf("document %d: %w", n, err)
		}
		if m == nil {
			continue // comments only
		}
		u := &unstructured.Unstructured{Object: m}
		items := []*unstructured.Unstructured{u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, 0, fmt.Errorf("document %d: %w", n, err)
			}
			items = items[:0]
			for i := range list.Items {
				it := &list.Items[i]
				// A typed list's items may leave out their kind.
				if it.GetKind() == "" && strings.TrimSuffix(u.GetKind(), "List") == Kind && u.GetAPIVersion() == GroupVersion.String() {
					it.SetAPIVersion(u.GetAPIVersion())
					it.SetKind(Kind)
				}
				items = append(items, it)
			}
		}
		for _, it := range items {
			if IsSource(it) {
				objs = append(objs, it)
			} else {
				ignored++
			}
		}
	}
}
