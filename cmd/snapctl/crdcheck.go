package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/crdcheck"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func runCRDCheck(prog string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(prog+" crd-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("crds", "", "Directory of the CRD manifests the upgrade will apply (the chart's files/crds).")
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig of the cluster; default $KUBECONFIG or ~/.kube/config.")
	if err := fs.Parse(args); err != nil {
		return helpExit(err)
	}
	if *dir == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, usage(prog))
		return 2
	}
	shipped, err := readCRDs(*dir)
	if err != nil {
		fmt.Fprintln(stderr, prog+" crd-check:", err)
		return 2
	}
	live, err := liveCRDs(*kubeconfig, shipped)
	if err != nil {
		fmt.Fprintln(stderr, prog+" crd-check:", err)
		return 2
	}
	findings := crdcheck.Check(live, shipped)
	blocking := 0
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
		if f.Severity == crdcheck.Blocking {
			blocking++
		}
	}
	fmt.Fprintf(stdout, "%d CRDs checked (%d in the cluster), %d findings, %d blocking\n", len(shipped), len(live), len(findings), blocking)
	if blocking > 0 {
		return 1
	}
	return 0
}

// readCRDs reads every CustomResourceDefinition in dir's YAML files.
func readCRDs(dir string) ([]crdcheck.CRD, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []crdcheck.CRD
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var c crdcheck.CRD
			var kind struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if kind.Kind != "CustomResourceDefinition" {
				continue
			}
			if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s/*.yaml", dir)
	}
	return out, nil
}

// liveCRDs reads the cluster's CRDs of the names shipped.
func liveCRDs(kubeconfig string, shipped []crdcheck.CRD) ([]crdcheck.CRD, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []crdcheck.CRD
	for _, s := range shipped {
		u, err := client.Resource(crdResource).Get(ctx, s.Metadata.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("reading CRD %s: %w", s.Metadata.Name, err)
		}
		b, err := json.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		var c crdcheck.CRD
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
