package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	oldV, oldR := Version, Revision
	t.Cleanup(func() { Version, Revision = oldV, oldR })
	Version, Revision = "v1.2.3", "0123abc"
	want := "v1.2.3 (revision 0123abc, " + runtime.Version() + ")"
	if got := String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	// The version stays the first field, for readers of the old output.
	if f := strings.Fields(String()); f[0] != "v1.2.3" {
		t.Errorf("first field %q, want the version", f[0])
	}
}

func TestStringUnstampedRevision(t *testing.T) {
	old := Revision
	t.Cleanup(func() { Revision = old })
	Revision = ""
	if got := String(); !strings.Contains(got, "(revision "+GetRevision()+", "+runtime.Version()+")") {
		t.Errorf("String() = %q", got)
	}
}
