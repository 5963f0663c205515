package gitops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	admregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// chartPolicies gives each webhook the framework registered the failure
// policy charts/snapkeeper/values.yaml ships for its resource (Fail for the
// snapshot kinds, Ignore for claims).
func chartPolicies(t *testing.T, env *framework.Env) {
	t.Helper()
	var values struct {
		Webhook struct {
			Admission struct {
				Rules map[string]struct {
					FailurePolicy admregv1.FailurePolicyType `json:"failurePolicy"`
				} `json:"rules"`
			} `json:"admission"`
		} `json:"webhook"`
	}
	if err := framework.ReadYAML(filepath.Join(framework.ChartDir(), "values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	policy := func(name string) *admregv1.FailurePolicyType {
		p, ok := values.Webhook.Admission.Rules[strings.TrimSuffix(name, ".validation.snapkeeper.io")]
		if !ok || p.FailurePolicy == "" {
			t.Fatalf("values.yaml has no failurePolicy for %s", name)
		}
		return &p.FailurePolicy
	}
	ctx := context.Background()
	reg := env.Kube.AdmissionregistrationV1()
	v, err := reg.ValidatingWebhookConfigurations().Get(ctx, framework.WebhookConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].FailurePolicy = policy(v.Webhooks[i].Name)
	}
	if _, err := reg.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := reg.MutatingWebhookConfigurations().Get(ctx, framework.WebhookConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Webhooks {
		m.Webhooks[i].FailurePolicy = policy(m.Webhooks[i].Name)
	}
	if _, err := reg.MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// verdict is one object's judgement: "admitted" or "denied: <first
// message>".
type verdicts map[string]string

// agrees is scenario 6: `snapctl validate --kubeconfig` with the webhook's
// options, run on the repository's working copy as a CI step with read
// access to the cluster runs it, judges each object as the live API server
// does (a server-side dry-run apply of that object alone, with Flux's field
// manager); and the object Flux's Ready message names is one both deny.
// Without --kubeconfig snapctl sees the set alone: its verdicts are logged
// (docs/gitops.md says where they differ).
func (w *world) agrees(t *testing.T, flux outcome) {
	t.Helper()
	live := w.liveVerdicts(t)
	ci := w.snapctl(t, append(judging, "--kubeconfig", w.Env.Kubeconfig)...)
	offline := w.snapctl(t, judging...)
	keys := make([]string, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var table strings.Builder
	fmt.Fprintf(&table, "%-60s %-9s %-9s %-9s\n", "object", "live", "snapctl", "offline")
	for _, k := range keys {
		fmt.Fprintf(&table, "%-60s %-9s %-9s %-9s\n", k, word(live[k]), word(ci[k]), word(offline[k]))
		if word(live[k]) != word(ci[k]) {
			t.Errorf("%s: live %q, snapctl --kubeconfig %q", k, live[k], ci[k])
		}
	}
	t.Logf("scenario 6, object for object:\n%s", table.String())
	for k, v := range live {
		if strings.HasPrefix(v, "denied") {
			t.Logf("  %s: %s", k, v)
		}
	}
	named := ""
	for k := range live {
		if strings.Contains(flux.Message, k+" dry-run failed") {
			named = k
		}
	}
	if named == "" || word(ci[named]) != "denied" {
		t.Errorf("Flux named %q in %q; snapctl says %q", named, flux.Message, ci[named])
	}
}

func word(v string) string {
	if v == "" {
		return "-"
	}
	return strings.SplitN(v, ":", 2)[0]
}

// objectKey is how Flux names an object in its messages: Kind/name or
// Kind/namespace/name.
func objectKey(kind, ns, name string) string {
	if ns == "" {
		return kind + "/" + name
	}
	return kind + "/" + ns + "/" + name
}

// liveVerdicts dry-runs each object of the working copy alone.
func (w *world) liveVerdicts(t *testing.T) verdicts {
	t.Helper()
	resources := map[string]schema.GroupVersionResource{
		"VolumeSnapshotClass":   {Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"},
		"VolumeSnapshot":        {Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"},
		"PersistentVolumeClaim": {Version: "v1", Resource: "persistentvolumeclaims"},
	}
	out := verdicts{}
	files, err := filepath.Glob(filepath.Join(w.repo.work, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			gvr, ok := resources[u.GetKind()]
			if !ok {
				t.Fatalf("%s: no resource for kind %s", f, u.GetKind())
			}
			data, err := json.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err = w.Env.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: "kustomize-controller", DryRun: []string{metav1.DryRunAll}, Force: ptrTo(true)})
			cancel()
			key := objectKey(u.GetKind(), u.GetNamespace(), u.GetName())
			if err != nil {
				out[key] = "denied: " + err.Error()
			} else {
				out[key] = "admitted"
			}
		}
	}
	return out
}

func ptrTo[V any](v V) *V { return &v }

// snapctl runs `snapctl validate -o json [args] <working copy>`.
func (w *world) snapctl(t *testing.T, args ...string) verdicts {
	t.Helper()
	bin, err := framework.OwnBinary("./cmd/snapctl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(append([]string{"validate", "-o", "json"}, args...), w.repo.work)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("snapctl validate %v: %v\n%s", args, err, stderr.String())
	}
	var entries []struct {
		Kind, Name, Namespace string
		Allowed               bool
		Errors                []struct{ Field, Message string }
	}
	if err := json.Unmarshal(stdout, &entries); err != nil {
		t.Fatalf("snapctl validate -o json: %v\n%s", err, stdout)
	}
	out := verdicts{}
	for _, e := range entries {
		v := "admitted"
		if !e.Allowed {
			v = "denied"
			if len(e.Errors) > 0 {
				v += ": " + e.Errors[0].Field + ": " + e.Errors[0].Message
			}
		}
		out[objectKey(e.Kind, e.Namespace, e.Name)] = v
	}
	return out
}
