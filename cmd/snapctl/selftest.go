package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// classWebhook is the entry of the chart's ValidatingWebhookConfiguration
	// that judges VolumeSnapshotClasses (templates/webhook-configuration.yaml).
	classWebhook = "volumesnapshotclasses.validation.snapkeeper.io"
	// selftestRule is the text of the one rule invalidClass breaks
	// (pkg/validation, secretPairErrors); the unit test holds the two
	// together, so a reworded rule fails here and not in a cluster.
	selftestRule = "a secret reference needs both a name and a namespace"
)

func selftestUsage(prog string) string {
	return "usage: " + prog + " selftest webhook [--kubeconfig PATH] [--class-name NAME] [--timeout DURATION]"
}

// runSelftest is `selftest webhook`, the chart's `helm test` Pod
// (templates/tests/webhook-test.yaml): a dry-run create of an invalid
// VolumeSnapshotClass must come back denied by our webhook, which shows
// the API server reached it through its Service, trusted its certificate,
// and the webhook judged the object. Exit 0: that denial; 1: any other
// answer, or no cluster; 2: bad usage.
func runSelftest(prog string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "webhook" {
		fmt.Fprintln(stderr, selftestUsage(prog))
		return 2
	}
	fs := flag.NewFlagSet(prog+" selftest webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig of the cluster; default: the Pod's ServiceAccount in a cluster, else $KUBECONFIG or ~/.kube/config.")
	name := fs.String("class-name", "snapkeeper-selftest-invalid", "Name of the invalid VolumeSnapshotClass (a dry run: nothing is stored).")
	timeout := fs.Duration("timeout", 30*time.Second, "How long to wait for the API server's answer.")
	if err := fs.Parse(args[1:]); err != nil {
		return helpExit(err)
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, selftestUsage(prog))
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s selftest webhook: FAIL: %v\n", prog, err)
		return 1
	}
	cfg, err := selftestConfig(*kubeconfig)
	if err != nil {
		return fail(err)
	}
	cfg.UserAgent = "snapctl-selftest"
	client, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("client: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := selftestWebhook(ctx, client, *name, stdout); err != nil {
		return fail(err)
	}
	return 0
}

// selftestConfig is --kubeconfig when given; else, in a Pod, its
// ServiceAccount (the helm test); else $KUBECONFIG or ~/.kube/config as
// kubectl reads them, so an operator can run the same check.
func selftestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// invalidClass is the class the webhook must deny: a snapshotter secret
// named without its namespace. Nothing else in it is wrong and the CRD's
// schema accepts it, so only the webhook can refuse it.
func invalidClass(name string) *snapv1.VolumeSnapshotClass {
	return &snapv1.VolumeSnapshotClass{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		Driver:         "helm-test.snapkeeper.io",
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		Parameters:     map[string]string{"csi.storage.k8s.io/snapshotter-secret-name": "only-the-name"},
	}
}

// selftestWebhook dry-run creates invalidClass (DryRun All: the API server
// runs admission, the webhook is called since it declares no side effects,
// and nothing is stored) and returns nil only for our webhook's denial.
func selftestWebhook(ctx context.Context, client snapclient.Interface, name string, stdout io.Writer) error {
	_, err := client.SnapshotV1().VolumeSnapshotClasses().Create(ctx, invalidClass(name),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return fmt.Errorf("the API server admitted the invalid VolumeSnapshotClass %q (a dry run: nothing was stored): "+
			"no webhook judged it; check that the ValidatingWebhookConfiguration has %s", name, classWebhook)
	}
	fmt.Fprintf(stdout, "dry-run create of the invalid VolumeSnapshotClass %q: %v\n", name, err)
	if err := webhookDenial(err); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "PASS: the webhook %s answered and denied the invalid class\n", classWebhook)
	return nil
}

// webhookDenial is nil when err is the API server relaying our webhook's
// denial for selftestRule (403 Forbidden, the webhook's code, behind the
// API server's `admission webhook "NAME" denied the request: `), and
// otherwise says what answered instead.
func webhookDenial(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "failed calling webhook"):
		// failurePolicy Fail: the webhook was not reached or did not answer.
		return fmt.Errorf("the API server could not call the webhook (its Service, endpoints or caBundle): %w", err)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		return fmt.Errorf("want a denial by %s, got %s: %w", classWebhook, reasonOf(err), err)
	case !strings.Contains(msg, fmt.Sprintf("admission webhook %q denied the request", classWebhook)):
		return fmt.Errorf("refused, but not by %s (the RBAC of this account, another admission plugin): %w", classWebhook, err)
	case !strings.Contains(msg, selftestRule):
		return fmt.Errorf("%s denied the class, but not for the secret reference without a namespace: %w", classWebhook, err)
	}
	return nil
}

func reasonOf(err error) string {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	return "an error without an API status"
}
