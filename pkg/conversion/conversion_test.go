package conversion

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	apiV1      = Group + "/" + V1
	apiV1beta1 = Group + "/" + V1beta1
	apiV1beta2 = Group + "/" + V1beta2
)

func mustDecode(t testing.TB, s string) map[string]any {
	t.Helper()
	m, err := Decode([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

func mustConvert(t testing.TB, obj map[string]any, to string, members Members) map[string]any {
	t.Helper()
	out, err := Convert(obj, to, members)
	if err != nil {
		t.Fatalf("Convert to %s: %v", to, err)
	}
	return out
}

func asJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeMembers answers for the contents it holds, keyed driver/group/snapshot.
type fakeMembers map[string]MemberInfo

func (f fakeMembers) Member(driver, groupHandle, snapshotHandle string) (MemberInfo, bool) {
	m, ok := f[driver+"/"+groupHandle+"/"+snapshotHandle]
	return m, ok
}

func ptr[T any](v T) *T { return &v }

// A creation time beyond float64's exact range: numbers must pass as written.
const v1Content = `{"apiVersion":"` + apiV1 + `","kind":"VolumeGroupSnapshotContent",
 "metadata":{"name":"gc-1","annotations":{"keep":"me"}},
 "spec":{"driver":"hostpath.csi.k8s.io","deletionPolicy":"Delete","future":{"x":1},
  "volumeGroupSnapshotRef":{"name":"g","namespace":"ns"},"source":{"volumeHandles":["v1","v2"]}},
 "status":{"volumeGroupSnapshotHandle":"group-1","readyToUse":true,"other":"kept",
  "volumeSnapshotInfoList":[
   {"volumeHandle":"v1","snapshotHandle":"s1","creationTime":1733300000123456789,"readyToUse":true,"restoreSize":1073741824},
   {"volumeHandle":"v2","snapshotHandle":"s2"}]}}`

func TestV1ToV1beta1KeepsWhatPairsCannotHoldAndComesBackWhole(t *testing.T) {
	in := mustDecode(t, v1Content)
	before := asJSON(t, in)
	old := mustConvert(t, in, apiV1beta1, nil)
	if asJSON(t, in) != before {
		t.Fatal("Convert modified its input")
	}
	status := old["status"].(map[string]any)
	if _, ok := status[fieldInfoList]; ok {
		t.Errorf("v1beta1 object still has %s", fieldInfoList)
	}
	wantPairs := `[{"snapshotHandle":"s1","volumeHandle":"v1"},{"snapshotHandle":"s2","volumeHandle":"v2"}]`
	if got := asJSON(t, status[fieldPairList]); got != wantPairs {
		t.Errorf("pairs %s, want %s", got, wantPairs)
	}
	anns := old["metadata"].(map[string]any)["annotations"].(map[string]any)
	if !strings.Contains(anns[AnnMemberInfo].(string), "1733300000123456789") || anns["keep"] != "me" {
		t.Errorf("annotations %v", anns)
	}
	for _, to := range []string{apiV1, apiV1beta2} {
		back := mustConvert(t, old, to, fakeMembers{"hostpath.csi.k8s.io/group-1/s2": {ReadyToUse: ptr(false)}})
		want := mustDecode(t, v1Content)
		want["apiVersion"] = to
		if d := cmp.Diff(asJSON(t, want), asJSON(t, back)); d != "" {
			t.Errorf("round trip to %s (-want +got):\n%s", to, d)
		}
	}
}

func TestAPairAddedAtV1beta1IsFilledFromItsMemberContent(t *testing.T) {
	old := mustConvert(t, mustDecode(t, v1Content), apiV1beta1, nil)
	status := old["status"].(map[string]any)
	status[fieldPairList] = append([]any{map[string]any{"volumeHandle": "v0", "snapshotHandle": "s0"}}, status[fieldPairList].([]any)...)
	back := mustConvert(t, old, apiV1, fakeMembers{"hostpath.csi.k8s.io/group-1/s0": {ReadyToUse: ptr(true)}})
	got := asJSON(t, back["status"].(map[string]any)[fieldInfoList])
	want := `[{"readyToUse":true,"snapshotHandle":"s0","volumeHandle":"v0"},` +
		`{"creationTime":1733300000123456789,"readyToUse":true,"restoreSize":1073741824,"snapshotHandle":"s1","volumeHandle":"v1"},` +
		`{"snapshotHandle":"s2","volumeHandle":"v2"}]`
	if got != want {
		t.Errorf("infos\n got %s\nwant %s", got, want)
	}
}

func TestV1beta1PairsBecomeInfosFilledFromTheirMemberContents(t *testing.T) {
	in := mustDecode(t, `{"apiVersion":"`+apiV1beta1+`","kind":"VolumeGroupSnapshotContent","metadata":{"name":"old"},
	 "spec":{"driver":"d"},"status":{"volumeGroupSnapshotHandle":"g1","volumeSnapshotHandlePairList":[
	  {"volumeHandle":"v1","snapshotHandle":"s1"},{"volumeHandle":"v2","snapshotHandle":"s2"},{"volumeHandle":"v3","snapshotHandle":"s3"}]}}`)
	members := fakeMembers{
		"d/g1/s1":    {CreationTime: ptr(int64(1733300000123456789)), ReadyToUse: ptr(true), RestoreSize: ptr(int64(5 << 30))},
		"d/g1/s2":    {ReadyToUse: ptr(true)},
		"d/other/s3": {ReadyToUse: ptr(true)}, // another group's member: not taken
	}
	out := mustConvert(t, in, apiV1, members)
	want := `[{"creationTime":1733300000123456789,"readyToUse":true,"restoreSize":5368709120,"snapshotHandle":"s1","volumeHandle":"v1"},` +
		`{"readyToUse":true,"snapshotHandle":"s2","volumeHandle":"v2"},{"snapshotHandle":"s3","volumeHandle":"v3"}]`
	status := out["status"].(map[string]any)
	if got := asJSON(t, status[fieldInfoList]); got != want {
		t.Errorf("infos\n got %s\nwant %s", got, want)
	}
	if _, ok := status[fieldPairList]; ok {
		t.Error("v1 object still has the pair list")
	}
	// Without member contents: the handles alone, nothing invented.
	out = mustConvert(t, in, apiV1beta2, nil)
	if got := asJSON(t, out["status"].(map[string]any)[fieldInfoList]); got !=
		`[{"snapshotHandle":"s1","volumeHandle":"v1"},{"snapshotHandle":"s2","volumeHandle":"v2"},{"snapshotHandle":"s3","volumeHandle":"v3"}]` {
		t.Errorf("infos without members: %s", got)
	}
}

func TestRelabelledObjectsAreConvertedByWhatTheyHold(t *testing.T) {
	// Stored by CRDs without conversion: a v1beta1 pair list under v1beta2.
	in := mustDecode(t, `{"apiVersion":"`+apiV1beta2+`","kind":"VolumeGroupSnapshotContent","metadata":{"name":"x"},
	 "spec":{"driver":"d"},"status":{"volumeSnapshotHandlePairList":[{"volumeHandle":"v1","snapshotHandle":"s1"}]}}`)
	out := mustConvert(t, in, apiV1, nil)
	if got := asJSON(t, out["status"]); got != `{"volumeSnapshotInfoList":[{"snapshotHandle":"s1","volumeHandle":"v1"}]}` {
		t.Errorf("status %s", got)
	}
	// An info list already there wins; the stale pairs go.
	in = mustDecode(t, `{"apiVersion":"`+apiV1beta1+`","kind":"VolumeGroupSnapshotContent","metadata":{"name":"x"},
	 "status":{"volumeSnapshotHandlePairList":[{"volumeHandle":"old","snapshotHandle":"old"}],
	  "volumeSnapshotInfoList":[{"volumeHandle":"v1","snapshotHandle":"s1","readyToUse":true}]}}`)
	out = mustConvert(t, in, apiV1, nil)
	if got := asJSON(t, out["status"]); got != `{"volumeSnapshotInfoList":[{"readyToUse":true,"snapshotHandle":"s1","volumeHandle":"v1"}]}` {
		t.Errorf("status %s", got)
	}
}

func TestOtherKindsChangeOnlyTheirAPIVersion(t *testing.T) {
	for _, obj := range []string{
		`{"apiVersion":"` + apiV1beta1 + `","kind":"VolumeGroupSnapshot","metadata":{"name":"g","namespace":"ns"},
		  "spec":{"source":{"selector":{"matchLabels":{"app":"db"}}},"volumeGroupSnapshotClassName":"c"},
		  "status":{"boundVolumeGroupSnapshotContentName":"gc","readyToUse":true,"volumeSnapshotHandlePairList":"untouched"}}`,
		`{"apiVersion":"` + apiV1 + `","kind":"VolumeGroupSnapshotClass","metadata":{"name":"c"},"driver":"d",
		  "deletionPolicy":"Retain","parameters":{"a":"b"}}`,
	} {
		in := mustDecode(t, obj)
		for _, to := range []string{apiV1beta1, apiV1beta2, apiV1} {
			out := mustConvert(t, in, to, nil)
			want := mustDecode(t, obj)
			want["apiVersion"] = to
			if d := cmp.Diff(want, out); d != "" {
				t.Errorf("%s to %s (-want +got):\n%s", in["kind"], to, d)
			}
		}
	}
}

func TestAHandEditedAnnotationIsDroppedNotFatal(t *testing.T) {
	in := mustDecode(t, `{"apiVersion":"`+apiV1beta1+`","kind":"VolumeGroupSnapshotContent",
	 "metadata":{"name":"x","annotations":{"`+AnnMemberInfo+`":"not json"}},
	 "status":{"volumeSnapshotHandlePairList":[{"volumeHandle":"v1","snapshotHandle":"s1"}]}}`)
	out := mustConvert(t, in, apiV1, nil)
	if _, ok := out["metadata"].(map[string]any)["annotations"]; ok {
		t.Errorf("annotation kept: %v", out["metadata"])
	}
}

func TestWhatCannotBeConvertedIsNamed(t *testing.T) {
	cases := []struct{ obj, to, want string }{
		{`{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"s"}}`, apiV1,
			`VolumeSnapshot s: apiVersion "snapshot.storage.k8s.io/v1": not of group groupsnapshot.storage.k8s.io`},
		{`{"apiVersion":"` + apiV1 + `","kind":"VolumeGroupSnapshot","metadata":{"name":"g"}}`, Group + "/v2",
			`VolumeGroupSnapshot g: desired apiVersion "groupsnapshot.storage.k8s.io/v2": version "v2" is not one of v1beta1, v1beta2, v1`},
		{`{"apiVersion":"` + apiV1 + `","kind":"Other","metadata":{"name":"o"}}`, apiV1beta1,
			`Other o: kind "Other" is not converted here: register this webhook only for VolumeGroupSnapshot, VolumeGroupSnapshotContent and VolumeGroupSnapshotClass`},
		{`{"apiVersion":"` + apiV1 + `","kind":"VolumeGroupSnapshotContent","metadata":{"name":"c"},"status":{"volumeSnapshotInfoList":{}}}`, apiV1beta1,
			`VolumeGroupSnapshotContent c: status.volumeSnapshotInfoList is an object, not a list`},
		{`{"apiVersion":"` + apiV1beta1 + `","kind":"VolumeGroupSnapshotContent","status":{"volumeSnapshotHandlePairList":[1]}}`, apiV1,
			`VolumeGroupSnapshotContent (unnamed): status.volumeSnapshotHandlePairList[0] is a number, not an object`},
		{`{"apiVersion":"` + apiV1 + `","kind":"VolumeGroupSnapshotContent","metadata":"m","status":{"volumeSnapshotInfoList":[{"readyToUse":true}]}}`, apiV1beta1,
			`VolumeGroupSnapshotContent (unnamed): metadata is a string, not an object`},
	}
	for _, c := range cases {
		_, err := Convert(mustDecode(t, c.obj), c.to, nil)
		var ce *Error
		if !errors.As(err, &ce) || err.Error() != c.want {
			t.Errorf("Convert(%s, %s):\n got %v\nwant %s", c.obj, c.to, err, c.want)
		}
	}
}

func TestDecodeRejectsWhatIsNotOneObject(t *testing.T) {
	for _, in := range []string{``, `null`, `[]`, `{} {}`, `{"a":`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) accepted", in)
		}
	}
}
