package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
	"github.com/snapkeeper/snapkeeper/pkg/scheduleview"
)

// timeNow is the clock of the dry run; tests replace it.
var timeNow = time.Now

func schedulesUsage(prog string) string {
	return "usage: " + prog + " schedules [-n NAMESPACE | -A] [-o text|json] [--kubeconfig PATH] [--runs N] [NAME]"
}

// schedulesOptions are the flags of snapctl schedules.
type schedulesOptions struct {
	namespace, output, kubeconfig, name string
	all                                 bool
	runs                                int
}

// runSchedules prints each SnapshotSchedule's next runs and a dry run of
// its retention now (pkg/scheduleview); it writes nothing. Exit 0: shown;
// 1: a schedule's spec is invalid, or NAME does not exist; 2: bad usage or
// the cluster cannot be read.
func runSchedules(prog string, args []string, stdout, stderr io.Writer) int {
	o, err := parseSchedulesFlags(prog, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, schedulesUsage(prog))
		return 2
	}
	cfg, ns, err := kubeconfigAndNamespace(o.kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, prog+" schedules:", err)
		return 2
	}
	switch {
	case o.all:
		ns = metav1.NamespaceAll
	case o.namespace != "":
		ns = o.namespace
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scheds, in, err := gatherSchedules(ctx, cfg, ns, o.name)
	if err != nil {
		fmt.Fprintln(stderr, prog+" schedules:", err)
		return 2
	}
	if o.name != "" && len(scheds) == 0 {
		fmt.Fprintf(stderr, "%s schedules: SnapshotSchedule %s/%s not found\n", prog, ns, o.name)
		return 1
	}
	now := timeNow()
	views := make([]scheduleview.View, 0, len(scheds))
	for i := range scheds {
		views = append(views, scheduleview.Build(&scheds[i], in, now, o.runs))
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(map[string]any{"schedules": views})
	} else {
		err = scheduleview.Write(stdout, views)
	}
	if err != nil {
		fmt.Fprintln(stderr, prog+" schedules: writing:", err)
		return 2
	}
	if scheduleview.Count(views).Invalid > 0 {
		return 1
	}
	return 0
}

// parseSchedulesFlags accepts NAME before, between or after the flags.
func parseSchedulesFlags(prog string, args []string, stderr io.Writer) (*schedulesOptions, error) {
	o := &schedulesOptions{}
	fs := flag.NewFlagSet(prog+" schedules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.namespace, "n", "", "Namespace of the schedules; default: the kubeconfig context's.")
	fs.StringVar(&o.namespace, "namespace", "", "Same as -n.")
	fs.BoolVar(&o.all, "A", false, "The schedules of every namespace.")
	fs.BoolVar(&o.all, "all-namespaces", false, "Same as -A.")
	fs.StringVar(&o.output, "o", "text", "Output: text or json.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster; default $KUBECONFIG or ~/.kube/config.")
	fs.IntVar(&o.runs, "runs", 3, "Scheduled times to show per schedule.")
	names, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(names) > 1:
		return nil, fmt.Errorf("%s schedules: at most one NAME, got %v", prog, names)
	case o.output != "text" && o.output != "json":
		return nil, fmt.Errorf("%s schedules: -o must be text or json, not %q", prog, o.output)
	case o.runs < 0:
		return nil, fmt.Errorf("%s schedules: --runs must be at least 0, not %d", prog, o.runs)
	case o.all && o.namespace != "":
		return nil, fmt.Errorf("%s schedules: -n and -A exclude each other", prog)
	case o.all && len(names) == 1:
		return nil, fmt.Errorf("%s schedules: a NAME is looked up in one namespace: give -n, not -A", prog)
	}
	if len(names) == 1 {
		o.name = names[0]
	}
	return o, nil
}

// kubeconfigAndNamespace loads a kubeconfig as kubectl does, with the
// namespace of its current context ("default" when it names none).
func kubeconfigAndNamespace(kubeconfig string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "snapctl"
	return cfg, ns, nil
}

// gatherSchedules reads the schedules of ns (named name, when given) and
// what their dry run looks at: their snapshots (by label), the claims of
// ns (restores protect snapshots) and, for group schedules, their group
// snapshots when the group CRDs are served.
func gatherSchedules(ctx context.Context, cfg *rest.Config, ns, name string) ([]v1alpha1.SnapshotSchedule, scheduleview.Input, error) {
	var in scheduleview.Input
	sc, err := schedclient.NewForConfig(cfg)
	if err != nil {
		return nil, in, fmt.Errorf("client: %w", err)
	}
	opts := metav1.ListOptions{}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	list, err := sc.Schedules(ns).List(ctx, opts)
	if apierrors.IsNotFound(err) {
		return nil, in, fmt.Errorf("the cluster does not serve SnapshotSchedules (snapshotschedules.%s/%s): install snapkeeper's CRDs", v1alpha1.SchemeGroupVersion.Group, v1alpha1.SchemeGroupVersion.Version)
	}
	if err != nil {
		return nil, in, fmt.Errorf("listing SnapshotSchedules: %w", err)
	}
	scheds := list.Items
	if len(scheds) == 0 {
		return nil, in, nil
	}
	sort.Slice(scheds, func(i, j int) bool {
		return scheds[i].Namespace+"/"+scheds[i].Name < scheds[j].Namespace+"/"+scheds[j].Name
	})
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, in, fmt.Errorf("client: %w", err)
	}
	snap, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return nil, in, fmt.Errorf("client: %w", err)
	}
	scheduled := metav1.ListOptions{LabelSelector: schedule.LabelSchedule}
	vss, err := snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, scheduled)
	if err != nil {
		return nil, in, fmt.Errorf("listing VolumeSnapshots: %w", err)
	}
	in.Snapshots = vss.Items
	pvcs, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, in, fmt.Errorf("listing PersistentVolumeClaims: %w", err)
	}
	in.PVCs = pvcs.Items
	if slices.ContainsFunc(scheds, func(s v1alpha1.SnapshotSchedule) bool { return s.Spec.GroupSnapshot != nil }) {
		groups, err := snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).List(ctx, scheduled)
		switch {
		case apierrors.IsNotFound(err): // the group CRDs are not installed
		case err != nil:
			return nil, in, fmt.Errorf("listing VolumeGroupSnapshots: %w", err)
		default:
			in.Groups, in.GroupsServed = groups.Items, true
		}
	}
	return scheds, in, nil
}
