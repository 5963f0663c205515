// Package webhook checks the admission webhook behind a real kube-apiserver:
// every manifest case under test/testdata is applied with kubectl, for real
// and with --dry-run=server, and must be rejected with its expected message
// or accepted (and re-applied unchanged without complaint).
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// enabledFeatureGates are the API server gates the framework turns on; a
// case that requires another one is skipped.
var enabledFeatureGates []string

func testdata(sub string) string {
	return filepath.Join(framework.RepoRoot(), "test", "testdata", sub)
}

func TestWebhook(t *testing.T) {
	env := framework.Shared(t)
	w := startWebhook(t, env)
	k := kubectl{t: t, env: env}
	applyFixtures(t, k)

	invalid, err := validationtest.LoadCases(testdata("invalid"))
	if err != nil {
		t.Fatal(err)
	}
	valid, err := validationtest.LoadCases(testdata("valid"))
	if err != nil {
		t.Fatal(err)
	}
	waitForCache(t, k, invalid)

	t.Run("invalid", func(t *testing.T) {
		for _, c := range invalid {
			t.Run(c.Name, func(t *testing.T) { rejectCase(t, k.with(t), c) })
		}
	})
	t.Run("valid", func(t *testing.T) {
		for _, c := range valid {
			t.Run(c.Name, func(t *testing.T) { acceptCase(t, k.with(t), c) })
		}
	})
	t.Run("sets", func(t *testing.T) { runSets(t, k.with(t)) }) // agree_test.go
	t.Run("metrics count verdicts", func(t *testing.T) { checkMetrics(t, w) })
	t.Run("certificate rotation under load", func(t *testing.T) { rotateCertificate(t, env, w) })
}

// rejectCase applies the prerequisites, then the object with
// --dry-run=server and for real: both must fail with the expected message.
func rejectCase(t *testing.T, k kubectl, c validationtest.Case) {
	if missing := missingGates(c.Requires); len(missing) > 0 {
		t.Skipf("needs API server feature gates %v", missing)
	}
	defer k.deleteAll(c.Docs)
	for i, doc := range c.Prerequisites() {
		if _, stderr, err := k.apply(doc); err != nil {
			t.Fatalf("prerequisite %d rejected: %v\n%s", i+1, err, stderr)
		}
	}
	for _, mode := range []string{"--dry-run=server", ""} {
		_, stderr, err := k.apply(c.Object(), mode)
		if err == nil {
			t.Fatalf("kubectl apply %s accepted the object; want a rejection", mode)
		}
		if mode != "" {
			agreeCase(t, k, c, false, stderr) // agree_test.go
		}
		want := c.Expect
		if c.ExpectAPIServer != "" {
			// The API server's own validation runs before the webhook.
			want = []string{c.ExpectAPIServer}
		} else {
			want = append([]string{"denied the request"}, want...)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("kubectl apply %s: stderr lacks %q:\n%s", mode, w, stderr)
			}
		}
	}
}

// acceptCase applies the object with --dry-run=server and for real, with
// the expected warnings, then re-applies it unchanged (client-side and
// server-side apply): all must be admitted.
func acceptCase(t *testing.T, k kubectl, c validationtest.Case) {
	defer k.deleteAll(c.Docs)
	for i, doc := range c.Prerequisites() {
		if _, stderr, err := k.apply(doc); err != nil {
			t.Fatalf("prerequisite %d rejected: %v\n%s", i+1, err, stderr)
		}
	}
	for _, mode := range []string{"--dry-run=server", "", "reapply", "--server-side"} {
		args := []string{mode}
		switch mode {
		case "reapply":
			args = nil
		case "--server-side":
			args = []string{"--server-side", "--force-conflicts", "--field-manager=e2e-reapply"}
		}
		_, stderr, err := k.apply(c.Object(), args...)
		if err != nil {
			t.Fatalf("kubectl apply %s rejected the object: %v\n%s", mode, err, stderr)
		}
		if mode == "--dry-run=server" {
			agreeCase(t, k, c, true, stderr) // agree_test.go
		}
		if mode != "" && mode != "--dry-run=server" {
			continue // a no-op apply may not reach the webhook, so no warnings
		}
		for _, w := range c.Warn {
			if !strings.Contains(stderr, w) {
				t.Errorf("kubectl apply %s: warnings lack %q:\n%s", mode, w, stderr)
			}
		}
	}
}

func missingGates(required []string) []string {
	var missing []string
	for _, g := range required {
		if !slices.Contains(enabledFeatureGates, g) {
			missing = append(missing, g)
		}
	}
	return missing
}

// applyFixtures applies test/testdata/fixtures in order, then writes the
// status stanzas through the status subresource (apply ignores them).
func applyFixtures(t *testing.T, k kubectl) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata("fixtures"), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		c, err := validationtest.LoadCase(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range c.Docs {
			if _, stderr, err := k.apply(doc); err != nil {
				t.Fatalf("fixture %s rejected: %v\n%s", f, err, stderr)
			}
			k.patchStatus(doc)
		}
	}
}

// waitForCache waits until the webhook's informers have the fixtures: the
// case that needs the most of them (a snapshot's status and its content)
// is rejected with its own message.
func waitForCache(t *testing.T, k kubectl, invalid []validationtest.Case) {
	t.Helper()
	i := slices.IndexFunc(invalid, func(c validationtest.Case) bool { return c.Name == "pvc-restore-block-from-filesystem" })
	if i < 0 {
		t.Fatal("case pvc-restore-block-from-filesystem is missing")
	}
	c := invalid[i]
	framework.Eventually(t, time.Minute, "webhook caches to hold the fixtures", func() (bool, error) {
		_, stderr, err := k.apply(c.Object(), "--dry-run=server")
		return err != nil && strings.Contains(stderr, c.Expect[0]), fmt.Errorf("%v: %s", err, stderr)
	})
}

func checkMetrics(t *testing.T, w *webhookServer) {
	resp, err := w.client.Get("https://" + w.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`snapkeeper_webhook_requests_total{operation="CREATE",resource="volumesnapshotclasses",verdict="denied"}`,
		`snapkeeper_webhook_requests_total{operation="UPDATE",resource="volumesnapshotcontents",verdict="denied"}`,
		`snapkeeper_webhook_requests_total{operation="CREATE",resource="persistentvolumeclaims",verdict="allowed"}`,
		`snapkeeper_webhook_request_duration_seconds_bucket{resource="volumesnapshots"`,
	} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// kubectl runs bin/kubectl for one test.
type kubectl struct {
	t   *testing.T
	env *framework.Env
}

func (k kubectl) with(t *testing.T) kubectl { return kubectl{t: t, env: k.env} }

func (k kubectl) run(stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return k.env.Kubectl(ctx, strings.NewReader(stdin), args...)
}

// apply runs kubectl apply -f - on doc with extra args ("" is dropped).
func (k kubectl) apply(doc []byte, extra ...string) (string, string, error) {
	args := []string{"apply", "-f", "-"}
	for _, a := range extra {
		if a != "" {
			args = append(args, a)
		}
	}
	return k.run(string(doc), args...)
}

// deleteAll removes a case's objects without waiting: claims keep the
// pvc-protection finalizer (no controller-manager runs), and names are
// unique per case.
func (k kubectl) deleteAll(docs [][]byte) {
	var all []string
	for _, d := range docs {
		all = append(all, string(d))
	}
	if _, stderr, err := k.run(strings.Join(all, "\n---\n"), "delete", "--ignore-not-found", "--wait=false", "-f", "-"); err != nil {
		k.t.Logf("cleanup: %v\n%s", err, stderr)
	}
}

// patchStatus writes a document's status, if any, through the status
// subresource.
func (k kubectl) patchStatus(doc []byte) {
	k.t.Helper()
	var obj struct {
		Kind     string         `json:"kind"`
		Metadata map[string]any `json:"metadata"`
		Status   map[string]any `json:"status"`
	}
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		k.t.Fatal(err)
	}
	if obj.Status == nil || (obj.Kind != "VolumeSnapshot" && obj.Kind != "VolumeSnapshotContent") {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": obj.Status})
	if err != nil {
		k.t.Fatal(err)
	}
	args := []string{"patch", strings.ToLower(obj.Kind) + "s.snapshot.storage.k8s.io", fmt.Sprint(obj.Metadata["name"]),
		"--subresource=status", "--type=merge", "-p", string(patch)}
	if ns, ok := obj.Metadata["namespace"]; ok {
		args = append(args, "-n", fmt.Sprint(ns))
	}
	if _, stderr, err := k.run("", args...); err != nil {
		k.t.Fatalf("patch status of %s %v: %v\n%s", obj.Kind, obj.Metadata["name"], err, stderr)
	}
}
