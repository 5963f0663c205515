package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/snapscheduler"
)

func convertUsage(prog string) string {
	return "usage: " + prog + " convert-snapscheduler [-o yaml] [-n NAMESPACE | -A] [--adopt [--dry-run]] [--kubeconfig PATH] [FILE|-...]"
}

// convertOptions are the flags of convert-snapscheduler.
type convertOptions struct {
	output, namespace, kubeconfig string
	all, adopt, dryRun            bool
	files                         []string
}

// runConvert prints snapscheduler's SnapshotSchedules (from FILEs, else
// from the cluster) as snapkeeper's on stdout; with --adopt it labels the
// snapshots snapscheduler cut for the converted schedules, reporting on
// stderr. Exit 0: all converted (and adopted); 1: a schedule could not be
// converted or a label failed; 2: bad usage, unreadable input or cluster.
func runConvert(prog string, args []string, stdout, stderr io.Writer) int {
	name := prog + " convert-snapscheduler"
	o, err := parseConvertFlags(prog, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, convertUsage(prog))
		return 2
	}
	var sources []*unstructured.Unstructured
	var cl *convertClients
	if len(o.files) == 0 || o.adopt {
		if cl, err = newConvertClients(o); err != nil {
			fmt.Fprintln(stderr, name+":", err)
			return 2
		}
	}
	ctx := context.Background() // each request has its own timeout
	if len(o.files) > 0 {
		sources, err = readSources(o.files, stderr)
	} else {
		sources, err = listSources(ctx, cl.dyn, cl.namespace)
	}
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 2
	}
	if len(sources) == 0 {
		fmt.Fprintln(stderr, name+": no snapscheduler SnapshotSchedule found")
		return 0
	}
	results := make([]snapscheduler.Result, 0, len(sources))
	code := 0
	for _, u := range sources {
		if u.GetNamespace() == "" && o.namespace != "" {
			u.SetNamespace(o.namespace)
		}
		r := snapscheduler.Convert(u)
		if r.Err != nil {
			fmt.Fprintf(stderr, "%s: %s not converted: %v\n", name, r.Source(), r.Err)
			code = 1
		}
		results = append(results, r)
	}
	if err := snapscheduler.WriteYAML(stdout, results); err != nil {
		fmt.Fprintln(stderr, name+": writing:", err)
		return 2
	}
	if o.adopt && adopt(ctx, cl, results, o.dryRun, name, stderr) > 0 {
		code = 1
	}
	return code
}

// parseConvertFlags accepts FILEs before, between or after the flags.
func parseConvertFlags(prog string, args []string, stderr io.Writer) (*convertOptions, error) {
	o := &convertOptions{}
	fs := flag.NewFlagSet(prog+" convert-snapscheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.output, "o", "yaml", "Output: yaml (a stream kubectl apply -f - takes).")
	fs.StringVar(&o.namespace, "n", "", "From the cluster: the namespace to read (default: the kubeconfig context's). From FILEs: the namespace of objects that name none.")
	fs.StringVar(&o.namespace, "namespace", "", "Same as -n.")
	fs.BoolVar(&o.all, "A", false, "From the cluster: every namespace.")
	fs.BoolVar(&o.all, "all-namespaces", false, "Same as -A.")
	fs.BoolVar(&o.adopt, "adopt", false, "Also label the VolumeSnapshots snapscheduler cut for each converted schedule with "+schedule.LabelSchedule+", so its retention counts them.")
	fs.BoolVar(&o.dryRun, "dry-run", false, "With --adopt: print what would be labelled, label nothing.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster; default $KUBECONFIG or ~/.kube/config.")
	files, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	o.files = files
	switch {
	case o.output != "yaml":
		return nil, fmt.Errorf("%s convert-snapscheduler: -o must be yaml, not %q", prog, o.output)
	case o.all && o.namespace != "":
		return nil, fmt.Errorf("%s convert-snapscheduler: -n and -A exclude each other", prog)
	case o.all && len(o.files) > 0:
		return nil, fmt.Errorf("%s convert-snapscheduler: -A reads the cluster; it goes with no FILE", prog)
	case o.dryRun && !o.adopt:
		return nil, fmt.Errorf("%s convert-snapscheduler: --dry-run goes with --adopt (the conversion itself writes nothing)", prog)
	}
	return o, nil
}

// convertClients are the clients of the cluster, and the namespace to read
// or adopt in ("" for all).
type convertClients struct {
	dyn       dynamic.Interface
	snap      snapclient.Interface
	namespace string
}

func newConvertClients(o *convertOptions) (*convertClients, error) {
	cfg, ns, err := kubeconfigAndNamespace(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	switch {
	case o.all:
		ns = metav1.NamespaceAll
	case o.namespace != "":
		ns = o.namespace
	}
	// Adopting patches one snapshot at a time: client-go's default of 5
	// requests a second would take minutes for a few thousand.
	cfg.QPS, cfg.Burst, cfg.Timeout = 50, 100, time.Minute
	cl := &convertClients{namespace: ns}
	if cl.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if cl.snap, err = snapclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cl, nil
}

// readSources reads every FILE ("-": stdin); the count of other kinds
// goes to stderr, as a file of mixed manifests is common.
func readSources(files []string, stderr io.Writer) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	ignored := 0
	for _, f := range files {
		r, closeFn, err := openInput(f)
		if err != nil {
			return nil, err
		}
		objs, n, err := snapscheduler.Read(r)
		closeFn()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out, ignored = append(out, objs...), ignored+n
	}
	if ignored > 0 {
		fmt.Fprintf(stderr, "%d objects of other kinds ignored\n", ignored)
	}
	return out, nil
}

func openInput(path string) (io.Reader, func(), error) {
	if path == "-" {
		return stdin, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

// listSources reads the snapscheduler schedules of namespace ns.
func listSources(ctx context.Context, dyn dynamic.Interface, ns string) ([]*unstructured.Unstructured, error) {
	list, err := dyn.Resource(snapscheduler.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the cluster does not serve %s %s (snapscheduler's CRD is not installed): nothing to read; convert saved manifests instead (FILE)",
			snapscheduler.GroupVersion, snapscheduler.Resource.Resource)
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", snapscheduler.Resource.GroupResource(), err)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out, nil
}

// adopt labels, for each converted schedule, the VolumeSnapshots
// snapscheduler cut for it with snapkeeper's schedule label: a merge patch
// of that one label. One labelled for another schedule already is left
// alone. It returns the number of failures.
func adopt(ctx context.Context, cl *convertClients, results []snapscheduler.Result, dryRun bool, name string, stderr io.Writer) int {
	verb := "labelled"
	if dryRun {
		verb = "would label"
	}
	failed, labelled, already := 0, 0, 0
	for _, r := range results {
		if r.Err != nil {
			continue
		}
		s := r.Schedule
		ns := s.Namespace
		if ns == "" {
			ns = cl.namespace // as kubectl apply places an object without one
		}
		list, err := cl.snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{LabelSelector: snapscheduler.LabelSchedule + "=" + s.Name})
		if err != nil {
			fmt.Fprintf(stderr, "%s: listing the VolumeSnapshots of %s/%s: %v\n", name, ns, s.Name, err)
			failed++
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{schedule.LabelSchedule: s.Name}}})
		for _, vs := range list.Items {
			switch v, ok := vs.Labels[schedule.LabelSchedule]; {
			case ok && v == s.Name:
				already++
				continue
			case ok:
				fmt.Fprintf(stderr, "skipped VolumeSnapshot %s/%s: it belongs to snapkeeper schedule %q already\n", ns, vs.Name, v)
				continue
			}
			if !dryRun {
				_, err := cl.snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, vs.Name, types.MergePatchType, patch, metav1.PatchOptions{})
				if err != nil {
					fmt.Fprintf(stderr, "%s: labelling VolumeSnapshot %s/%s: %v\n", name, ns, vs.Name, err)
					failed++
					continue
				}
			}
			labelled++
			fmt.Fprintf(stderr, "%s VolumeSnapshot %s/%s %s=%s\n", verb, ns, vs.Name, schedule.LabelSchedule, s.Name)
		}
	}
	fmt.Fprintf(stderr, "adopt: %s %d snapshots, %d labelled already, %d failed\n", verb, labelled, already, failed)
	return failed
}
