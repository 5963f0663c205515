// Package version holds the build version, stamped by the Makefile with
// -ldflags -X (see docs/releases.md): Version is `git describe --tags`, or
// v0.0.0-dev+<short commit>[.dirty] before the first tag; Revision is the
// full commit.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release of this build.
var Version = "dev"

// Revision is the commit this build was made from; when the linker did not
// stamp it, the Go toolchain's VCS stamp (vcs.revision) is used.
var Revision = ""

// GetRevision returns Revision, else the commit the Go toolchain recorded
// in the binary, else "unknown".
func GetRevision() string {
	if Revision != "" {
		return Revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// String is what --version prints after the program's name (the
// controller prints it alone): the version first, as before, then the
// commit and the Go release the binary was built with, the one release.mk
// pins for a release (docs/releases.md, "The Go toolchain"):
//
//	v1.2.0 (revision 0123abc..., go1.27.3)
//
// A reader that wants the version alone takes the first field.
func String() string {
	return fmt.Sprintf("%s (revision %s, %s)", Version, GetRevision(), runtime.Version())
}
