package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// expectClaimsJudged checks that the webhook judges claims through the
// chart's MutatingWebhookConfiguration: a restore whose data source has the
// wrong apiGroup is denied (the API server would drop that data source
// before validating admission, and provision the claim empty), a correct one
// is admitted. Both are dry runs. The entry's failurePolicy is Ignore, so
// until the API server's cache has the configuration as patched a wrong
// claim passes: the check is retried for a while.
func expectClaimsJudged(ctx context.Context, t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	claims := env.Kube.CoreV1().PersistentVolumeClaims(ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	framework.Eventually(t, 30*time.Second, "the webhook to deny restores from a data source of the wrong apiGroup", func() (bool, error) {
		for name, group := range map[string]*string{"no apiGroup": nil, "a foreign apiGroup": ptr("example.com")} {
			_, err := claims.Create(ctx, restoreClaim(group, nil), dryRun)
			if err == nil || !strings.Contains(err.Error(), "persistentvolumeclaims.validation.snapkeeper.io") ||
				!strings.Contains(err.Error(), "needs apiGroup") {
				return false, fmt.Errorf("restore with %s: got %v, want a denial by the webhook", name, err)
			}
		}
		return true, nil
	})
	if _, err := claims.Create(ctx, restoreClaim(ptr("snapshot.storage.k8s.io"), nil), dryRun); err != nil {
		t.Errorf("a restore with the right apiGroup: %v", err)
	}
}

func ownBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin, err := framework.OwnBinary("./" + pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// The webhook binary in selfManaged mode, with the chart's arguments and
// ServiceAccount: it creates its certificate, fills caBundle, and the API
// server then sends it reviews it can answer.
func TestSelfManagedWebhookBinaryFillsItsCABundle(t *testing.T) {
	webhookBin := ownBinary(t, "cmd/webhook")
	env, h := clusterHelm(t)
	ns, apps := env.Namespace(t), env.Namespace(t)
	h.Must(t, append([]string{"install", "sk", framework.ChartDir(), "--namespace", ns, "--set", "certificates.mode=selfManaged"}, installArgs...)...)
	uninstallOnCleanup(t, h, "sk", ns)

	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	framework.MustPointWebhooksAt(t, env, "sk-snapkeeper-webhook", fmt.Sprintf("127.0.0.1:%d", port))
	// A directory of the test's stands in for the emptyDir the chart mounts
	// for selfManaged certificates.
	p, err := framework.PodProcess{Namespace: ns, Deployment: "sk-snapkeeper-webhook", Container: "webhook", Confine: true}.
		LoopbackWebhook(context.Background(), env, port, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	webhook := p.Start(t, env, webhookBin)
	webhook.WaitOK(t, fmt.Sprintf("https://127.0.0.1:%d/readyz", port), time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	framework.Eventually(t, 30*time.Second, "caBundle filled by the webhook in both configurations", func() (bool, error) {
		bundles, err := framework.WebhookCABundles(ctx, env, "sk-snapkeeper-webhook")
		if err != nil {
			return false, err
		}
		for _, b := range bundles {
			if len(b) == 0 {
				return false, nil
			}
		}
		return len(bundles) == 8, nil // seven validating entries, one mutating
	})
	bad := &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-" + apps}, Driver: framework.MockDriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		Parameters:     map[string]string{"csi.storage.k8s.io/snapshotter-secret-name": "only-the-name"},
	}
	framework.Eventually(t, 30*time.Second, "the webhook to deny a bad class", func() (bool, error) {
		_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, bad, metav1.CreateOptions{})
		if err == nil {
			t.Fatal("a bad class was admitted")
		}
		return strings.Contains(err.Error(), "denied the request"), err
	})
	runHelmTestPod(t, env, h, ns)
	expectClaimsJudged(ctx, t, env, apps)
	// The chart's RBAC covers the certificate Manager: the Secret, and get,
	// list, watch and patch of both configurations.
	for _, line := range strings.Split(webhook.Tail(1<<20), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("the webhook was refused something: %s", line)
		}
	}
}
