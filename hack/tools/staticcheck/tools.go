//go:build tools

// Package tools pins staticcheck, which make lint-static builds from this
// module: its go.sum holds the checksums, so the build needs the module
// proxy only, never the checksum database.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
