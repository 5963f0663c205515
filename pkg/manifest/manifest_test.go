package manifest

import (
	"errors"
	"fmt"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

const snapDoc = `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: s1, namespace: ns}
spec: {source: {persistentVolumeClaimName: data}}
`

// describeAll decodes a stream into "index.item Kind name" lines.
func describeAll(t *testing.T, data string) []string {
	t.Helper()
	docs, err := ReadAll([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		obj, err := Decode(d.Raw)
		if errors.Is(err, ErrUnsupportedKind) {
			out = append(out, fmt.Sprintf("%d.%d skipped", d.Index, d.Item))
			continue
		}
		if err != nil {
			t.Fatalf("document %d.%d: %v", d.Index, d.Item, err)
		}
		out = append(out, fmt.Sprintf("%d.%d %T %s", d.Index, d.Item, obj, obj.GetName()))
	}
	return out
}

func TestReadAll(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"multi-document YAML", snapDoc + "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + snapDoc,
			[]string{"1.0 *v1.VolumeSnapshot s1", "2.0 skipped", "3.0 *v1.VolumeSnapshot s1"}},
		{"kind List", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata: {name: p}\n- apiVersion: snapshot.storage.k8s.io/v1\n  kind: VolumeSnapshotClass\n  metadata: {name: c}\n  driver: d\n  deletionPolicy: Delete\n",
			[]string{"1.1 *v1.PersistentVolumeClaim p", "1.2 *v1.VolumeSnapshotClass c"}},
		{"typed list items without kind", "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotList\nitems:\n- metadata: {name: a, namespace: ns}\n  spec: {source: {persistentVolumeClaimName: data}}\n- metadata: {name: b, namespace: ns}\n  spec: {source: {volumeSnapshotContentName: c}}\n",
			[]string{"1.1 *v1.VolumeSnapshot a", "1.2 *v1.VolumeSnapshot b"}},
		{"nested and empty lists", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - apiVersion: groupsnapshot.storage.k8s.io/v1\n    kind: VolumeGroupSnapshotClass\n    metadata: {name: g}\n    driver: d\n    deletionPolicy: Delete\n---\napiVersion: v1\nkind: List\nitems: []\n",
			[]string{"1.1 *v1.VolumeGroupSnapshotClass g"}},
		{"a ...List kind without items is an object", "apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: x}\n",
			[]string{"1.0 skipped"}},
		{"JSON stream and array", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}
[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b"}}, null]`,
			[]string{"1.0 *v1.Namespace a", "2.0 *v1.Namespace b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeAll(t, tt.in)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDecodeKinds(t *testing.T) {
	for doc, want := range map[string]any{
		snapDoc: &snapv1.VolumeSnapshot{},
		"apiVersion: groupsnapshot.storage.k8s.io/v1\nkind: VolumeGroupSnapshot\nmetadata: {name: g}\n": &groupv1.VolumeGroupSnapshot{},
		"apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\n":                                &corev1.PersistentVolume{},
		"apiVersion: snapkeeper.io/v1alpha1\nkind: SnapshotSchedule\nmetadata: {name: s}\n":             &v1alpha1.SnapshotSchedule{},
	} {
		obj, err := Decode([]byte(doc))
		if err != nil || fmt.Sprintf("%T", obj) != fmt.Sprintf("%T", want) {
			t.Errorf("Decode = %T, %v; want %T", obj, err, want)
		}
	}
}

func TestBadInputIsAnError(t *testing.T) {
	for name, in := range map[string]string{
		"unknown field":     "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {name: s}\nspecc: {}\n",
		"item not object":   "apiVersion: v1\nkind: List\nitems: [1]\n",
		"broken JSON":       `{"kind": `,
		"list too deep":     deepList(maxListDepth + 1),
		"invalid YAML type": "apiVersion: [1\n",
	} {
		t.Run(name, func(t *testing.T) {
			docs, err := ReadAll([]byte(in))
			for _, d := range docs {
				if err == nil {
					_, err = Decode(d.Raw)
				}
			}
			if err == nil || errors.Is(err, ErrUnsupportedKind) {
				t.Errorf("no error for %q (%v)", in, err)
			}
		})
	}
}

func deepList(n int) string {
	doc := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"deep"}}`
	for range n {
		doc = `{"apiVersion":"v1","kind":"List","items":[` + doc + `]}`
	}
	return doc
}
