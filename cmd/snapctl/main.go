// Command snapctl validates snapshot manifests offline, with the webhook's
// own rules, so a CI pipeline can reject a bad change before it reaches a
// cluster:
//
//	snapctl validate [-o text|json] [--kubeconfig PATH] [-n NAMESPACE] [-v] PATH|-...
//
// PATH is a YAML/JSON file, a directory (read recursively; `helm template`
// output works) or - for stdin; List documents are expanded. Every snapshot,
// group snapshot and PersistentVolumeClaim object is judged against all the
// other objects given, as if they were applied together, and with
// --kubeconfig against the cluster too (docs/snapctl.md). It exits 1 when
// any object is denied, 2 on bad usage or unreadable input.
//
//	snapctl crd-check --crds DIR [--kubeconfig PATH]
//
// compares the snapshot CRDs of a live cluster with the CRD manifests in
// DIR (the chart's files/crds) before an upgrade: a version still in a live
// CRD's status.storedVersions that the new CRD lacks makes the API server
// refuse the upgrade. It prints each finding with its fix and exits 1 when
// one would block the upgrade.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/snapkeeper/snapkeeper/pkg/version"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: snapctl validate [-o text|json] [--kubeconfig PATH] [-n NAMESPACE] [-v] [--strict-populators] [--allow-cross-namespace-data-source] PATH|-...
       snapctl crd-check --crds DIR [--kubeconfig PATH]
       snapctl --version`

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version"):
		fmt.Fprintln(stdout, "snapctl", version.Version)
		return 0
	case len(args) > 0 && args[0] == "validate":
		return runValidate(args, stdout, stderr)
	case len(args) > 0 && args[0] == "crd-check":
		return runCRDCheck(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "doctor":
		return runDoctor(args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, usage)
	return 2
}

func runValidate(args []string, stdout, stderr io.Writer) int {
	return validateMain(args[1:], stdout, stderr) // validate.go
}
