package conformance

import (
	"strings"
	"testing"
)

// The diff and the allow-list matching, without a cluster.
func TestDiffAndAllowList(t *testing.T) {
	ref := outcome{
		"s1:create.VolumeSnapshot/snap.status.readyToUse":    "true",
		"s1:create.VolumeSnapshot/snap.status.error.message": "Failed: x",
		"events.VolumeSnapshot[Normal:CreatingSnapshot]":     "seen",
		"s2:delete.backend[snapshot-a]":                      "present",
	}
	got := outcome{
		"s1:create.VolumeSnapshot/snap.status.readyToUse":           "true",
		"s1:create.VolumeSnapshot/snap.status.error.message":        "x is wrong; fix it",
		"s2:delete.calls[DeleteSnapshot snapshot=snapshot-a -> OK]": "called",
	}
	diffs := diff(ref, got)
	var kinds []string
	for _, d := range diffs {
		kinds = append(kinds, d.Change+" "+d.Path)
	}
	want := []string{
		"changed s1:create.VolumeSnapshot/snap.status.error.message",
		"missing s2:delete.backend[snapshot-a]",
		"extra s2:delete.calls[DeleteSnapshot snapshot=snapshot-a -> OK]",
		"missing events.VolumeSnapshot[Normal:CreatingSnapshot]",
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff =\n%s\nwant\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	doc := &compatDoc{allow: []allowEntry{
		{ID: "msgs", Scenarios: []string{"*"}, Pairings: []string{"*"}, Paths: []string{"*.status.error.message"}, Change: changeValue},
		{ID: "events", Scenarios: []string{"dyn-*"}, Pairings: []string{"ours-ours"}, Paths: []string{"events.VolumeSnapshot[Normal:CreatingSnapshot]"}, Change: changeMissing},
		// Wrong kind of change: an extra backend snapshot would be allowed, a
		// missing one is not.
		{ID: "backend", Scenarios: []string{"*"}, Pairings: []string{"*"}, Paths: []string{"s2:*.backend[*]"}, Change: changeExtra},
	}}
	doc.accept("dyn-delete", "ours-ours", diffs)
	allowed := map[string]string{}
	for _, d := range diffs {
		allowed[d.Path] = d.Allowed
	}
	if allowed["s1:create.VolumeSnapshot/snap.status.error.message"] != "msgs" ||
		allowed["events.VolumeSnapshot[Normal:CreatingSnapshot]"] != "events" ||
		allowed["s2:delete.backend[snapshot-a]"] != "" ||
		allowed["s2:delete.calls[DeleteSnapshot snapshot=snapshot-a -> OK]"] != "" {
		t.Errorf("allowed = %v", allowed)
	}
	// The same differences in another pairing or scenario are not covered by
	// the narrower entry.
	for i := range diffs {
		diffs[i].Allowed = ""
	}
	doc.accept("import", "ours-ours", diffs)
	for _, d := range diffs {
		if d.Path == "events.VolumeSnapshot[Normal:CreatingSnapshot]" && d.Allowed != "" {
			t.Errorf("entry for dyn-* covered scenario import")
		}
	}
	if c := cell(&result{}, diffs, nil); c != "**differs**" {
		t.Errorf("cell = %q", c)
	}
	if c := cell(&result{}, []difference{{Allowed: "b"}, {Allowed: "a"}, {Allowed: "race"}}, map[string]bool{"race": true}); c != "[`a`](#a), [`b`](#b)" {
		t.Errorf("cell = %q", c)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, s string
		want    bool
	}{
		{"*", "anything/at.all[x]", true},
		{"s2:*", "s2:delete snap.VolumeSnapshot/snap.exists", true},
		{"s2:*", "s12:x", false},
		{"events.VolumeSnapshot[Normal:CreatingSnapshot]", "events.VolumeSnapshot[Normal:CreatingSnapshot]", true},
		{"*.status.error.message", "s1:a.VolumeSnapshot/snap.status.error", false},
	} {
		if got := globMatch(tc.glob, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.glob, tc.s, got)
		}
	}
}
