package crdcheck

import (
	"strings"
	"testing"
)

func crd(name string, stored []string, versions ...Version) CRD {
	var c CRD
	c.Metadata.Name = name
	c.Spec.Versions = versions
	c.Status.StoredVersions = stored
	return c
}

const groups = "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io"

func TestCheck(t *testing.T) {
	next := crd(groups, nil, Version{Name: "v1beta2", Served: true, Storage: true}, Version{Name: "v1", Served: true})
	for _, tc := range []struct {
		name   string
		live   []CRD
		want   []Severity
		saying []string
	}{
		{name: "fresh install", live: nil},
		{name: "only the storage version stored", live: []CRD{crd(groups, []string{"v1beta2"},
			Version{Name: "v1beta2", Storage: true})}},
		{name: "a stored version the new CRD lacks",
			live: []CRD{crd(groups, []string{"v1beta1", "v1beta2"}, Version{Name: "v1beta1", Storage: true}, Version{Name: "v1beta2"})},
			want: []Severity{Blocking}, saying: []string{"v1beta1", "refuse", "kubectl patch crd " + groups, "snapctl migrate-storage --resources " + groups}},
		{name: "an older stored version the new CRD still has",
			live: []CRD{crd(groups, []string{"v1", "v1beta2"}, Version{Name: "v1beta2", Storage: true}, Version{Name: "v1"})},
			want: []Severity{Warning}, saying: []string{"v1", "rewrite"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.live, []CRD{next})
			if len(got) != len(tc.want) {
				t.Fatalf("findings %v, want %v", got, tc.want)
			}
			for i, f := range got {
				if f.Severity != tc.want[i] || f.CRD != groups {
					t.Errorf("finding %d: %v", i, f)
				}
				for _, s := range tc.saying {
					if !strings.Contains(f.String(), s) {
						t.Errorf("finding %q does not say %q", f, s)
					}
				}
			}
		})
	}
}
