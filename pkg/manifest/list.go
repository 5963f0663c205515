package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// maxListDepth bounds how deeply Lists may nest (a List of Lists is legal,
// a thousand levels of it is an attack on the reader).
const maxListDepth = 8

// Document is one object of a manifest stream: the Index-th document
// (from 1) of its file, or item Item (from 1) of the List that document is.
// Item is 0 for a document that is not a List.
type Document struct {
	Index int
	Item  int
	Raw   []byte
}

// ReadAll splits a stream (SplitDocuments) and expands every List document
// into its items (Expand), so callers see each object once, in order.
func ReadAll(data []byte) ([]Document, error) {
	docs, err := SplitDocuments(data)
	if err != nil {
		return nil, err
	}
	var out []Document
	for i, doc := range docs {
		items, isList, err := Expand(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if !isList {
			out = append(out, Document{Index: i + 1, Raw: doc})
			continue
		}
		for j, item := range items {
			out = append(out, Document{Index: i + 1, Item: j + 1, Raw: item})
		}
	}
	return out, nil
}

// Expand returns the items of a List document as JSON documents: kind
// List of apiVersion v1 (what `kubectl get -o yaml` prints) and every typed
// list kind such as VolumeSnapshotList, whose items may omit apiVersion and
// kind (they are the list's, without the "List" suffix). Nested Lists are
// flattened. isList is false, and items nil, for any other document.
func Expand(doc []byte) (items [][]byte, isList bool, err error) {
	return expand(doc, 0)
}

type listDoc struct {
	metav1.TypeMeta `json:",inline"`
	Items           *[]json.RawMessage `json:"items"`
}

func isListKind(kind string) bool { return kind == "List" || strings.HasSuffix(kind, "List") }

func expand(doc []byte, depth int) ([][]byte, bool, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil || !isListKind(tm.Kind) {
		return nil, false, nil // Decode reports the error, with its kind
	}
	var l listDoc
	if err := yaml.Unmarshal(doc, &l); err != nil {
		return nil, true, fmt.Errorf("reading the items of %s: %w", tm.Kind, err)
	}
	if l.Items == nil {
		return nil, false, nil // a kind named ...List that is no list
	}
	if depth >= maxListDepth {
		return nil, true, fmt.Errorf("lists nested more than %d deep", maxListDepth)
	}
	var out [][]byte
	for i, raw := range *l.Items {
		item, err := typedItem(raw, tm)
		if err != nil {
			return nil, true, fmt.Errorf("%s item %d: %w", tm.Kind, i+1, err)
		}
		sub, nested, err := expand(item, depth+1)
		switch {
		case err != nil:
			return nil, true, fmt.Errorf("%s item %d: %w", tm.Kind, i+1, err)
		case nested:
			out = append(out, sub...)
		default:
			out = append(out, item)
		}
	}
	return out, true, nil
}

// typedItem fills in the apiVersion and kind a typed list's item may lack.
func typedItem(raw json.RawMessage, list metav1.TypeMeta) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("an item must be an object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("an item must be an object, not null")
	}
	if list.Kind != "List" {
		if _, ok := obj["kind"]; !ok {
			obj["kind"] = strings.TrimSuffix(list.Kind, "List")
		}
		if _, ok := obj["apiVersion"]; !ok {
			obj["apiVersion"] = list.APIVersion
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("re-encoding an item: %w", err)
	}
	return out, nil
}

func isJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n\ufeff")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// splitJSON reads a sequence of JSON values; an array contributes its
// elements, null values are dropped as YAML's empty documents are.
func splitJSON(data []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimLeft(data, "\ufeff")))
	var docs [][]byte
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading JSON document %d: %w", len(docs)+1, err)
		}
		t := bytes.TrimSpace(raw)
		switch {
		case bytes.Equal(t, []byte("null")):
		case t[0] == '[':
			var elems []json.RawMessage
			if err := json.Unmarshal(t, &elems); err != nil {
				return nil, fmt.Errorf("reading JSON array: %w", err)
			}
			for _, e := range elems {
				if !bytes.Equal(bytes.TrimSpace(e), []byte("null")) {
					docs = append(docs, e)
				}
			}
		default:
			docs = append(docs, t)
		}
	}
}
