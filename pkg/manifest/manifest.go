// Package manifest reads YAML manifests of the kinds our admission rules
// judge into typed objects: for the offline validator and the tests.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// ErrUnsupportedKind: the document is of a kind the snapshot rules do not
// judge (a Deployment, say); callers usually skip it.
var ErrUnsupportedKind = errors.New("unsupported kind")

// SplitDocuments splits a multi-document YAML stream, dropping empty
// documents. A stream that starts with '{' or '[' is read as JSON: a
// sequence of objects, and a top-level array gives one document per element.
func SplitDocuments(data []byte) ([][]byte, error) {
	if isJSON(data) {
		return splitJSON(data)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML document %d: %w", len(docs)+1, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out.Write(l)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// Decode turns a YAML or JSON document into the typed object of its kind:
// the snapshot and group snapshot kinds, SnapshotSchedule,
// PersistentVolumeClaim, PersistentVolume or Namespace. A List is not
// decoded here: see Expand.
func Decode(doc []byte) (metav1.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	obj := newObject(tm)
	if obj == nil {
		return nil, fmt.Errorf("%w: kind %q of apiVersion %q", ErrUnsupportedKind, tm.Kind, tm.APIVersion)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", tm.Kind, err)
	}
	return obj, nil
}

// newObject returns an empty object of the kind, or nil for other kinds.
func newObject(tm metav1.TypeMeta) metav1.Object {
	switch tm.GroupVersionKind() {
	case snapv1.SchemeGroupVersion.WithKind("VolumeSnapshotClass"):
		return &snapv1.VolumeSnapshotClass{}
	case snapv1.SchemeGroupVersion.WithKind("VolumeSnapshot"):
		return &snapv1.VolumeSnapshot{}
	case snapv1.SchemeGroupVersion.WithKind("VolumeSnapshotContent"):
		return &snapv1.VolumeSnapshotContent{}
	case groupv1.SchemeGroupVersion.WithKind("VolumeGroupSnapshotClass"):
		return &groupv1.VolumeGroupSnapshotClass{}
	case groupv1.SchemeGroupVersion.WithKind("VolumeGroupSnapshot"):
		return &groupv1.VolumeGroupSnapshot{}
	case groupv1.SchemeGroupVersion.WithKind("VolumeGroupSnapshotContent"):
		return &groupv1.VolumeGroupSnapshotContent{}
	case corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"):
		return &corev1.PersistentVolumeClaim{}
	case corev1.SchemeGroupVersion.WithKind("PersistentVolume"):
		return &corev1.PersistentVolume{}
	case corev1.SchemeGroupVersion.WithKind("Namespace"):
		return &corev1.Namespace{}
	case v1alpha1.SchemeGroupVersion.WithKind("SnapshotSchedule"):
		return &v1alpha1.SnapshotSchedule{}
	}
	return nil
}
