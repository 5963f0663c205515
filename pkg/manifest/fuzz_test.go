package manifest

import "testing"

// FuzzReadAll feeds arbitrary bytes through the reader and the decoder:
// any input may be an error, none may panic or hang.
func FuzzReadAll(f *testing.F) {
	for _, seed := range []string{
		snapDoc,
		snapDoc + "---\n" + snapDoc,
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n",
		"apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotList\nitems:\n- metadata: {name: a}\n",
		`[{"apiVersion":"v1","kind":"List","items":[null]}]`,
		deepList(3),
		"---\n---\n# comment\n",
		"\ufeff{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := ReadAll(data)
		if err != nil {
			return
		}
		for _, d := range docs {
			_, _ = Decode(d.Raw)
		}
	})
}
