package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/manifest"
	"github.com/snapkeeper/snapkeeper/pkg/manifestcheck"
	"github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// `snapctl validate --kubeconfig` and the live webhook must agree: every
// case of the corpus is judged by both (the case runner calls agreeCase
// right after its dry-run apply, with the prerequisites in the cluster),
// and so is every multi-file set of test/testdata/sets (runSets).

// fieldOf finds the field paths a denial names: validation.Message ends
// every line with "(field PATH)".
var fieldOf = regexp.MustCompile(`\(field ([^)\s]+)\)`)

func webhookFields(stderr string) []string {
	var out []string
	for _, m := range fieldOf.FindAllStringSubmatch(stderr, -1) {
		out = append(out, m[1])
	}
	return sortedSet(out)
}

func snapctlFields(r manifestcheck.Result) []string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, e.Field)
	}
	return sortedSet(out)
}

func sortedSet(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}

// snapctlJudge is what `snapctl validate --kubeconfig` concludes on docs.
func snapctlJudge(t *testing.T, k kubectl, file string, docs ...[]byte) []manifestcheck.Result {
	t.Helper()
	world, err := manifestcheck.NewCluster(context.Background(), k.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	var objs []manifestcheck.Object
	for i, doc := range docs {
		obj, err := manifest.Decode(doc)
		if err != nil {
			t.Fatalf("decoding document %d: %v", i+1, err)
		}
		objs = append(objs, manifestcheck.Object{File: file, Document: i + 1, Obj: obj})
	}
	return manifestcheck.Judge(objs, manifestcheck.Config{World: world})
}

// agreeCase compares snapctl's verdict on the case's object with the
// webhook's dry-run answer (allowed, stderr). When the API server's own
// validation answered, only the verdict is compared.
func agreeCase(t *testing.T, k kubectl, c validationtest.Case, allowed bool, stderr string) {
	t.Helper()
	results := snapctlJudge(t, k, c.Path, c.Object())
	if len(results) != 1 {
		t.Fatalf("snapctl judged %d objects, want 1", len(results))
	}
	if msg := disagreement(results[0], allowed, stderr, c.ExpectAPIServer == ""); msg != "" {
		t.Errorf("snapctl and the webhook disagree: %s", msg)
	}
}

// disagreement describes how r differs from the API server's answer, or "".
func disagreement(r manifestcheck.Result, allowed bool, stderr string, compareFields bool) string {
	if r.Allowed != allowed {
		return fmt.Sprintf("snapctl allowed=%v (%+v), webhook allowed=%v:\n%s", r.Allowed, r.Errors, allowed, stderr)
	}
	if allowed || !compareFields {
		return ""
	}
	if got, want := snapctlFields(r), webhookFields(stderr); !slices.Equal(got, want) {
		return fmt.Sprintf("snapctl names fields %q, the webhook %q:\n%s", got, want, stderr)
	}
	return ""
}

func runSets(t *testing.T, k kubectl) {
	sets, err := validationtest.LoadSets(testdata("sets"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		t.Run(s.Name, func(t *testing.T) { runSet(t, k.with(t), s) })
	}
}

// runSet judges a set with snapctl before anything of it exists, then
// each of its objects through the webhook: all the others created first,
// the object dry-run applied, everything deleted again.
func runSet(t *testing.T, k kubectl, s validationtest.Set) {
	loaded, err := manifestcheck.Load([]string{s.Dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, o := range loaded.Objects {
		doc, err := json.Marshal(o.Obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, isNS := o.Obj.(*corev1.Namespace); isNS {
			if _, stderr, err := k.apply(doc); err != nil {
				t.Fatalf("namespace: %v\n%s", err, stderr)
			}
			continue
		}
		docs = append(docs, doc)
	}
	results := snapctlJudge(t, k, s.Dir, docs...)
	if len(results) != len(docs) {
		t.Fatalf("snapctl judged %d of %d objects", len(results), len(docs))
	}
	defer k.deleteAll(docs)
	for i, r := range results {
		key := validationtest.SetKey(r.Kind, r.Namespace, r.Name)
		if _, denied := s.Denied[key]; denied == r.Allowed {
			t.Errorf("%s: snapctl allowed=%v, outcome.txt says denied=%v: %+v", key, r.Allowed, denied, r.Errors)
		}
		others := slices.Concat(docs[:i], docs[i+1:])
		k.deleteAll(docs)
		if len(others) > 0 {
			k.apply(joinDocs(others)) // an object the webhook denies is just not there
		}
		var last string
		err := pollVerdict(func() bool {
			_, stderr, err := k.apply(docs[i], "--dry-run=server")
			last = disagreement(r, err == nil, stderr, true)
			return last == ""
		})
		if err != nil {
			t.Errorf("%s: snapctl and the webhook disagree: %s", key, last)
		}
	}
}

// pollVerdict gives the webhook's informers a moment to see the objects
// just created.
func pollVerdict(agree func() bool) error {
	deadline := time.Now().Add(15 * time.Second)
	for !agree() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no agreement after 15s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func joinDocs(docs [][]byte) []byte {
	parts := make([]string, len(docs))
	for i, d := range docs {
		parts[i] = string(d)
	}
	return []byte(strings.Join(parts, "\n---\n"))
}
