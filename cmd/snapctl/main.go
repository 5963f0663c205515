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
//
//	snapctl doctor [-n NAMESPACE] [-o text|json] [--kubeconfig PATH] [NAME]
//
// explains every snapshot object that is stuck and every SnapshotSchedule
// that does not cut,
//
//	snapctl schedules [-n NAMESPACE | -A] [-o text|json] [--kubeconfig PATH] [--runs N] [NAME]
//
// shows each SnapshotSchedule's next runs and a dry run of its retention
// now (what it keeps, and why; what the next sync would delete),
//
//	snapctl convert-snapscheduler [-o yaml] [-n NAMESPACE | -A] [--adopt [--dry-run]] [--kubeconfig PATH] [FILE|-...]
//
// prints snapscheduler's SnapshotSchedules (from files, or the cluster) as
// snapkeeper SnapshotSchedules, and with --adopt labels the snapshots
// snapscheduler cut so their retention counts them,
//
//	snapctl migrate-storage [--dry-run] [--resources NAME,...] [--workers N] [--kubeconfig PATH]
//
// rewrites every object of the snapshot CRDs at its CRD's storage version
// and then trims the CRD's status.storedVersions to that version, and
//
//	snapctl selftest webhook [--kubeconfig PATH]
//
// is the chart's `helm test`: the webhook must deny an invalid class.
//
// Installed as kubectl-snapkeeper on PATH (the krew plugin), the same
// binary runs as `kubectl snapkeeper ...` and names itself so.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/snapkeeper/snapkeeper/pkg/version"
)

func main() { os.Exit(run(progName(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr)) }

// pluginFile is the file name kubectl looks for on PATH to run
// `kubectl snapkeeper`; krew installs the binary under it.
const pluginFile = "kubectl-snapkeeper"

// progName is the command a user typed, for every usage and error text:
// kubectl runs a plugin with its file path as argv[0], and the user, who
// typed `kubectl snapkeeper`, must be shown that, not a name they never
// used. Any other file name (a versioned copy, bin/snapctl) is snapctl.
func progName(arg0 string) string {
	if strings.TrimSuffix(filepath.Base(arg0), ".exe") == pluginFile {
		return "kubectl snapkeeper"
	}
	return "snapctl"
}

// usageFormat is the synopsis of every subcommand; %[1]s is the program name.
const usageFormat = `usage: %[1]s validate [-o text|json] [--kubeconfig PATH] [-n NAMESPACE] [-v] [--strict-populators] [--allow-cross-namespace-data-source] PATH|-...
       %[1]s crd-check --crds DIR [--kubeconfig PATH]
       %[1]s doctor [-n NAMESPACE] [-o text|json] [--kubeconfig PATH] [NAME]
       %[1]s schedules [-n NAMESPACE | -A] [-o text|json] [--kubeconfig PATH] [--runs N] [NAME]
       %[1]s convert-snapscheduler [-o yaml] [-n NAMESPACE | -A] [--adopt [--dry-run]] [--kubeconfig PATH] [FILE|-...]
       %[1]s migrate-storage [--dry-run] [--resources NAME,...] [--workers N] [--page-size N] [-o text|json] [--kubeconfig PATH]
       %[1]s selftest webhook [--kubeconfig PATH] [--class-name NAME] [--timeout DURATION]
       %[1]s help | --version`

func usage(prog string) string { return fmt.Sprintf(usageFormat, prog) }

// run is the whole command as prog: help and --version exit 0, an unknown
// or missing subcommand 2, a subcommand its own status.
func run(prog string, args []string, stdout, stderr io.Writer) int {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	switch verb {
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, prog, version.String())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage(prog))
		return 0
	case "validate":
		return validateMain(prog, args[1:], stdout, stderr) // validate.go
	case "crd-check":
		return runCRDCheck(prog, args[1:], stdout, stderr)
	case "doctor":
		return runDoctor(prog, args[1:], stdout, stderr)
	case "schedules":
		return runSchedules(prog, args[1:], stdout, stderr) // schedules.go
	case "convert-snapscheduler":
		return runConvert(prog, args[1:], stdout, stderr) // convert.go
	case "migrate-storage":
		return runMigrate(prog, args[1:], stdout, stderr) // migrate.go
	case "selftest":
		return runSelftest(prog, args[1:], stdout, stderr) // selftest.go
	}
	fmt.Fprintln(stderr, usage(prog))
	return 2
}

// parseArgs parses fs over args with the positional arguments anywhere
// among the flags (as kubectl takes them), and returns the positional
// ones. A failure, -h included (errors.Is flag.ErrHelp), names the
// subcommand.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%s: %w", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// helpExit is the status of a subcommand whose flags failed to parse: -h
// asked for the flags, which the flag package has printed, and is no error.
func helpExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
