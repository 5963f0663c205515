package conversion

import (
	"errors"
	"testing"
)

// FuzzRoundTrip: any VolumeGroupSnapshotContent taken from v1 to v1beta1 and
// back comes back as it was (fields v1beta1 has no place for included), so
// does one taken from v1beta1 to v1 and back, and whatever the bytes,
// Convert never panics and fails only with an *Error.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte(v1Content))
	f.Add([]byte(`{"metadata":{"annotations":{}},"status":{"volumeSnapshotInfoList":[{},{"x":[1,2]},{}]}}`))
	f.Add([]byte(`{"status":{"volumeSnapshotInfoList":[{"volumeHandle":1,"snapshotHandle":null,"readyToUse":false}]}}`))
	f.Add([]byte(`{"status":{"volumeSnapshotInfoList":null}}`))
	f.Add([]byte(`{"status":{"volumeSnapshotHandlePairList":[{"volumeHandle":"v","snapshotHandle":"s"},{}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, err := Decode(body)
		if err != nil {
			return
		}
		roundTripFromV1beta1(t, body)
		obj["apiVersion"], obj["kind"] = apiV1, KindGroupSnapshotContent
		// Not in a v1 object: the annotation is v1beta1's, the pairs too.
		if obj["metadata"] == nil {
			obj["metadata"] = map[string]any{"name": "fuzzed"} // objects stored have one
		}
		if meta, ok := obj["metadata"].(map[string]any); ok {
			if anns, ok := meta["annotations"].(map[string]any); ok {
				delete(anns, AnnMemberInfo)
				if len(anns) == 0 {
					delete(meta, "annotations") // an empty map comes back absent
				}
			}
		}
		if status, ok := obj["status"].(map[string]any); ok {
			delete(status, fieldPairList)
		}
		old, err := Convert(obj, apiV1beta1, nil)
		var ce *Error
		if err != nil {
			if !errors.As(err, &ce) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		back, err := Convert(old, apiV1, fakeMembers{})
		if err != nil {
			t.Fatalf("back to v1: %v\nv1beta1: %s", err, asJSON(t, old))
		}
		if got, want := asJSON(t, back), asJSON(t, obj); got != want {
			t.Fatalf("round trip changed the object\n got %s\nwant %s\nv1beta1 %s", got, want, asJSON(t, old))
		}
	})
}

// roundTripFromV1beta1: pairs of handles taken to v1 (no member contents
// known) and back are the same pairs.
func roundTripFromV1beta1(t *testing.T, body []byte) {
	obj, err := Decode(body)
	if err != nil {
		return
	}
	obj["apiVersion"], obj["kind"] = apiV1beta1, KindGroupSnapshotContent
	if meta, ok := obj["metadata"].(map[string]any); ok {
		if anns, ok := meta["annotations"].(map[string]any); ok {
			if _, ok := anns[AnnMemberInfo]; ok {
				return // the annotation is tested from v1
			}
		}
	}
	if status, ok := obj["status"].(map[string]any); ok {
		delete(status, fieldInfoList)
		if pairs, ok := status[fieldPairList].([]any); ok {
			for _, p := range pairs {
				if m, ok := p.(map[string]any); ok {
					for k := range m {
						if k != fieldVolumeHandle && k != fieldSnapshotHandle {
							delete(m, k) // v1beta1 pairs have the handles only
						}
					}
				}
			}
		}
	}
	v1, err := Convert(obj, apiV1, nil)
	if err != nil {
		return
	}
	back, err := Convert(v1, apiV1beta1, nil)
	if err != nil {
		t.Fatalf("back to v1beta1: %v\nv1: %s", err, asJSON(t, v1))
	}
	if got, want := asJSON(t, back), asJSON(t, obj); got != want {
		t.Fatalf("round trip from v1beta1 changed the object\n got %s\nwant %s\nv1 %s", got, want, asJSON(t, v1))
	}
}
