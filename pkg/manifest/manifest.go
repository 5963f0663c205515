// Package manifest reads YAML manifests of the kinds our admission rules
// judge into typed objects: for the offline validator and the tests.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ErrUnsupportedKind: the document is of a kind the snapshot rules do not
// judge (a Deployment, say); callers usually skip it.
var ErrUnsupportedKind = errors.New("unsupported kind")

// SplitDocuments splits a multi-document YAML stream, dropping empty
// documents.
func SplitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
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
// the snapshot kinds, PersistentVolumeClaim, PersistentVolume or Namespace.
func Decode(doc []byte) (metav1.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj metav1.Object
	switch tm.GroupVersionKind() {
	case snapv1.SchemeGroupVersion.WithKind("VolumeSnapshotClass"):
		obj = &snapv1.VolumeSnapshotClass{}
	case snapv1.SchemeGroupVersion.WithKind("VolumeSnapshot"):
		obj = &snapv1.VolumeSnapshot{}
	case snapv1.SchemeGroupVersion.WithKind("VolumeSnapshotContent"):
		obj = &snapv1.VolumeSnapshotContent{}
	case corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"):
		obj = &corev1.PersistentVolumeClaim{}
	case corev1.SchemeGroupVersion.WithKind("PersistentVolume"):
		obj = &corev1.PersistentVolume{}
	case corev1.SchemeGroupVersion.WithKind("Namespace"):
		obj = &corev1.Namespace{}
	default:
		return nil, fmt.Errorf("%w: kind %q of apiVersion %q", ErrUnsupportedKind, tm.Kind, tm.APIVersion)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
