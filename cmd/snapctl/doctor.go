package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/snapkeeper/snapkeeper/pkg/doctor"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

func doctorUsage(prog string) string {
	return "usage: " + prog + " doctor [-n NAMESPACE] [-o text|json] [--kubeconfig PATH] [NAME]"
}

// doctorOptions are the flags of snapctl doctor.
type doctorOptions struct {
	namespace, output, kubeconfig, name string
}

// runDoctor explains every VolumeSnapshot, VolumeSnapshotContent and group
// snapshot object that is not ready or is stuck deleting, one line each,
// and each reason a SnapshotSchedule does not cut (pkg/doctor). Exit 0: nothing stuck; 1: something is; 2: bad usage or
// the cluster cannot be read.
func runDoctor(prog string, args []string, stdout, stderr io.Writer) int {
	o, err := parseDoctorFlags(prog, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintln(stderr, doctorUsage(prog))
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := gatherDoctorInput(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, prog+" doctor:", err)
		return 2
	}
	findings := doctor.Filter(doctor.Analyze(in), o.namespace, o.name)
	if err := printFindings(stdout, o.output, findings, in.LeasesKnown); err != nil {
		fmt.Fprintln(stderr, prog+" doctor:", err)
		return 2
	}
	if len(findings) > 0 {
		return 1
	}
	return 0
}

// parseDoctorFlags accepts NAME before, between or after the flags.
func parseDoctorFlags(prog string, args []string, stderr io.Writer) (*doctorOptions, error) {
	o := &doctorOptions{}
	fs := flag.NewFlagSet(prog+" doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.namespace, "n", "", "Namespace to look at; default: all.")
	fs.StringVar(&o.namespace, "namespace", "", "Same as -n.")
	fs.StringVar(&o.output, "o", "text", "Output: text (one line per stuck object) or json.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster; default $KUBECONFIG or ~/.kube/config.")
	names, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	switch {
	case len(names) > 1:
		return nil, fmt.Errorf("%s doctor: at most one NAME, got %v", prog, names)
	case o.output != "text" && o.output != "json":
		return nil, fmt.Errorf("%s doctor: -o must be text or json, not %q", prog, o.output)
	}
	if len(names) == 1 {
		o.name = names[0]
	}
	return o, nil
}

func printFindings(w io.Writer, output string, findings []doctor.Finding, leasesKnown bool) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if findings == nil {
			findings = []doctor.Finding{}
		}
		return enc.Encode(map[string]any{"findings": findings, "leasesRead": leasesKnown})
	}
	for _, f := range findings {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return fmt.Errorf("writing: %w", err)
		}
	}
	if !leasesKnown {
		fmt.Fprintln(w, "note: Leases could not be read, so nothing is said about CSI sides")
	}
	if len(findings) == 0 {
		_, err := fmt.Fprintln(w, "nothing stuck")
		return err
	}
	// A schedule can have several findings; the count is of objects.
	objects := map[string]bool{}
	for _, f := range findings {
		objects[f.Object()] = true
	}
	_, err := fmt.Fprintf(w, "%d stuck objects\n", len(objects))
	return err
}

// doctorClients connects to the cluster of kubeconfig.
func doctorClients(kubeconfig string) (*rest.Config, kubernetes.Interface, snapclient.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "snapctl-doctor"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("client: %w", err)
	}
	snap, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("client: %w", err)
	}
	return cfg, kube, snap, nil
}

// secretsNamed says, for every Secret a content names, whether it exists;
// one that may not be read stays unknown.
func secretsNamed(ctx context.Context, kube kubernetes.Interface, in *doctor.Input) error {
	in.Secrets = map[string]bool{}
	for _, c := range in.Contents {
		ns, name := c.Annotations[snapshot.AnnDeletionSecretNamespace], c.Annotations[snapshot.AnnDeletionSecretName]
		if ns == "" || name == "" {
			continue
		}
		if _, done := in.Secrets[ns+"/"+name]; done {
			continue
		}
		_, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			in.Secrets[ns+"/"+name] = true
		case apierrors.IsNotFound(err):
			in.Secrets[ns+"/"+name] = false
		case apierrors.IsForbidden(err):
		default:
			return fmt.Errorf("reading secret %s/%s: %w", ns, name, err)
		}
	}
	return nil
}
