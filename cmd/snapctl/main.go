// Command snapctl validates snapshot manifests offline, with the webhook's
// own rules, so a CI pipeline can reject a bad change before it reaches a
// cluster:
//
//	snapctl validate [--strict-populators] [--allow-cross-namespace-data-source] PATH...
//
// PATH is a YAML/JSON file or a directory (read recursively; `helm template`
// output works). Every VolumeSnapshotClass, VolumeSnapshot,
// VolumeSnapshotContent and PersistentVolumeClaim is judged as a CREATE
// against all the other objects given, as if they were applied together.
// It exits 1 when any object is denied, 2 on bad usage or unreadable input.
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
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: snapctl validate [--strict-populators] [--allow-cross-namespace-data-source] PATH...
       snapctl crd-check --crds DIR [--kubeconfig PATH]`

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "validate":
		return runValidate(args, stdout, stderr)
	case len(args) > 0 && args[0] == "crd-check":
		return runCRDCheck(args[1:], stdout, stderr)
	}
	fmt.Fprintln(stderr, usage)
	return 2
}

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.StrictPopulators, "strict-populators", false, "Deny claims whose data source kind no VolumePopulator registers (as the webhook's flag).")
	fs.BoolVar(&o.AllowCrossNamespaceDataSource, "allow-cross-namespace-data-source", false, "Admit dataSourceRef.namespace (as the webhook's flag).")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "snapctl validate: no PATH given")
		return 2
	}
	objs, skipped, err := load(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "snapctl:", err)
		return 2
	}
	denied := validateAll(objs, o, stdout)
	fmt.Fprintf(stdout, "%d objects judged, %d denied, %d documents of other kinds skipped\n", judged(objs), denied, skipped)
	if denied > 0 {
		return 1
	}
	return 0
}
