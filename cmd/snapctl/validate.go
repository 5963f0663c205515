package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/snapkeeper/snapkeeper/pkg/manifestcheck"
	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// stdin is what `-` reads; tests replace it.
var stdin io.Reader = os.Stdin

type validateFlags struct {
	opts       validation.Options
	output     string
	kubeconfig string
	namespace  string
	verbose    bool
}

func parseValidate(prog string, args []string, stderr io.Writer) (*validateFlags, []string, error) {
	fs := flag.NewFlagSet(prog+" validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f validateFlags
	fs.BoolVar(&f.opts.StrictPopulators, "strict-populators", false, "Deny claims whose data source kind no VolumePopulator registers (as the webhook's flag).")
	fs.BoolVar(&f.opts.AllowCrossNamespaceDataSource, "allow-cross-namespace-data-source", false, "Admit dataSourceRef.namespace (as the webhook's flag).")
	fs.StringVar(&f.output, "o", "text", "Output format: text or json.")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Also consult the cluster of this kubeconfig for objects the manifests do not define.")
	fs.StringVar(&f.namespace, "n", "default", "Namespace of namespaced objects that name none.")
	fs.BoolVar(&f.verbose, "v", false, "Also report the documents of other kinds that are ignored.")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if f.output != "text" && f.output != "json" {
		return nil, nil, fmt.Errorf("-o %q: want text or json", f.output)
	}
	if fs.NArg() == 0 {
		return nil, nil, fmt.Errorf("no PATH given (a file, a directory or - for stdin)")
	}
	return &f, fs.Args(), nil
}

// validateMain is `snapctl validate ARGS`: 0 when every object is
// admitted, 1 when any is denied, 2 on bad usage or unreadable input.
func validateMain(prog string, args []string, stdout, stderr io.Writer) int {
	f, paths, err := parseValidate(prog, args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintln(stderr, prog+" validate:", err)
		}
		return helpExit(err)
	}
	loaded, err := manifestcheck.Load(paths, stdin)
	if err != nil {
		fmt.Fprintln(stderr, prog+" validate:", err)
		return 2
	}
	cfg := manifestcheck.Config{Options: f.opts, Namespace: f.namespace}
	if f.kubeconfig != "" {
		if cfg.World, err = cluster(f.kubeconfig); err != nil {
			fmt.Fprintln(stderr, prog+" validate:", err)
			return 2
		}
	}
	if f.verbose {
		for _, n := range loaded.Notes {
			fmt.Fprintln(stderr, n)
		}
	}
	results := manifestcheck.Judge(loaded.Objects, cfg)
	if f.output == "json" {
		err = writeJSON(stdout, results)
	} else {
		err = writeText(stdout, results, len(loaded.Notes))
	}
	if err != nil {
		fmt.Fprintln(stderr, prog+" validate:", err)
		return 2
	}
	for _, r := range results {
		if !r.Allowed {
			return 1
		}
	}
	return 0
}

func cluster(kubeconfig string) (*manifestcheck.Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return manifestcheck.NewCluster(context.Background(), cfg)
}

func writeJSON(w io.Writer, results []manifestcheck.Result) error {
	if results == nil {
		results = []manifestcheck.Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(results); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// writeText prints one line per denial reason and per warning, then a
// summary line.
func writeText(w io.Writer, results []manifestcheck.Result, ignored int) error {
	denied := 0
	for _, r := range results {
		where := fmt.Sprintf("%s:%d", r.File, r.Document)
		if r.Item > 0 {
			where = fmt.Sprintf("%s.%d", where, r.Item)
		}
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		if !r.Allowed {
			denied++
		}
		for _, e := range r.Errors {
			if _, err := fmt.Fprintf(w, "%s: %s %s: DENIED: %s (field %s)\n", where, r.Kind, name, e.Message, e.Field); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
		}
		for _, m := range r.Warnings {
			if _, err := fmt.Fprintf(w, "%s: %s %s: warning: %s\n", where, r.Kind, name, m); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
		}
	}
	_, err := fmt.Fprintf(w, "%d objects judged, %d denied, %d documents of other kinds ignored\n", len(results), denied, ignored)
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}
