// Package version holds the build version, stamped by the Makefile and the
// Dockerfile with -ldflags -X.
package version

// Version is the release of this build.
var Version = "dev"
