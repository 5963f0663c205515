package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// verdict is what the API server said to one apply.
type verdict struct {
	denied  bool     // the webhook denied it
	fields  []string // the fields its denial names
	message string   // the denial, as the user sees it
	err     error    // anything else: a timeout, a 5xx, a webhook call that failed
	took    time.Duration
}

func (v verdict) String() string {
	switch {
	case v.err != nil:
		return "error: " + v.err.Error()
	case v.denied:
		return fmt.Sprintf("denied %v: %s", v.fields, v.message)
	}
	return "admitted"
}

// TestGitOpsResync applies a repository of 200 snapshot objects at once
// through the API server with the webhook registered, as a GitOps tool
// syncing a repository does (one server-side apply per object, all in
// flight together), then applies the same 200 again, unchanged, as its
// periodic re-sync does. The threat: verdicts that depend on load or on
// the order the batch happens to arrive in, or a webhook that times out
// under the burst and fails the whole sync. Every valid object must be
// admitted every time; every invalid one denied every time, naming the
// same fields with the same message as when applied alone; nothing may
// fail otherwise (no timeout, no 5xx, no "failed calling webhook").
func TestGitOpsResync(t *testing.T) {
	_ = newRand(t) // logs how to replay; the scenario draws nothing at random
	passes := shortOrFull(2, 6)
	env := framework.Shared(t)
	ns := env.Namespace(t)
	wh := env.StartWebhook(t)
	_, taken := resyncWorld(t, env, ns)
	repo := resyncRepository(ns, taken)
	// The webhook's warnings (a snapshot naming a class applied in the
	// same batch) are expected; they would flood the test's output.
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteClusterScoped(dyn, repo) })
	waitResyncCache(t, dyn, repo)

	alone := applyAlone(t, dyn, repo)
	t.Logf("repository: %d objects, %d valid, %d invalid; every invalid one denied alone", len(repo), len(repo)-len(alone), len(alone))
	for pass := 1; pass <= passes; pass++ {
		before, err := wh.Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got := applyAll(dyn, repo)
		wall := time.Since(start)
		after, err := wh.Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		what := "re-sync, unchanged"
		if pass == 1 {
			what = "first sync"
		}
		t.Logf("pass %d (%s): %d applies in %v wall: %s; webhook: %v", pass, what, len(repo), wall.Round(time.Millisecond),
			checkPass(t, pass, repo, got, alone), framework.LatencyBetween(before, after))
		t.Logf("pass %d, webhook by resource: classes %v; snapshots %v; contents %v; claims %v", pass,
			framework.LatencyBetween(before, after, "volumesnapshotclasses"), framework.LatencyBetween(before, after, "volumesnapshots"),
			framework.LatencyBetween(before, after, "volumesnapshotcontents"), framework.LatencyBetween(before, after, "persistentvolumeclaims"))
	}
}

// applyAlone applies each invalid object by itself, one after the other,
// and returns the denials by index in repo: the reference every pass must
// match.
func applyAlone(t *testing.T, dyn dynamic.Interface, repo []resyncObject) map[int]verdict {
	t.Helper()
	alone := map[int]verdict{}
	for i, o := range repo {
		if o.wantField == "" {
			continue
		}
		v := applyObject(context.Background(), dyn, o)
		if !v.denied || !slices.ContainsFunc(v.fields, func(f string) bool { return strings.HasPrefix(f, o.wantField) }) {
			t.Fatalf("%s %s applied alone: %v; want a denial naming %s", o.kind, o.name, v, o.wantField)
		}
		alone[i] = v
	}
	return alone
}

// checkPass fails for every verdict of a pass that is not the expected
// one: valid objects admitted, invalid ones denied as when alone, nothing
// failed otherwise. It sums up the counts and the client's latencies.
func checkPass(t *testing.T, pass int, repo []resyncObject, got []verdict, alone map[int]verdict) string {
	t.Helper()
	admitted, denied, bad := 0, 0, 0
	var took []time.Duration
	for i, o := range repo {
		v := got[i]
		took = append(took, v.took)
		want, invalid := alone[i]
		switch {
		case v.err != nil:
			t.Errorf("pass %d: %s %s: %v", pass, o.kind, o.name, v.err)
		case !invalid && v.denied:
			t.Errorf("pass %d: valid %s %s denied: %s", pass, o.kind, o.name, v.message)
		case invalid && (!v.denied || v.message != want.message || !slices.Equal(v.fields, want.fields)):
			t.Errorf("pass %d: %s %s: %v; alone it was %v", pass, o.kind, o.name, v, want)
		case v.denied:
			denied++
			continue
		default:
			admitted++
			continue
		}
		bad++
	}
	slices.Sort(took)
	return fmt.Sprintf("%d admitted, %d denied as alone, %d otherwise; client p50 %v, p99 %v, max %v", admitted, denied, bad,
		took[len(took)/2].Round(time.Millisecond), took[len(took)*99/100].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// applyAll applies every object from its own goroutine, all released
// together, and returns the verdicts in the order of objs.
func applyAll(dyn dynamic.Interface, objs []resyncObject) []verdict {
	out := make([]verdict, len(objs))
	framework.AtOnce(len(objs), func(i int) { out[i] = applyObject(context.Background(), dyn, objs[i]) })
	return out
}

// applyObject server-side applies o, as a GitOps tool does, and sorts the
// answer into admitted, denied by the webhook, or failed.
func applyObject(ctx context.Context, dyn dynamic.Interface, o resyncObject) verdict {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	data, err := applyBody(o.obj)
	if err != nil {
		return verdict{err: err}
	}
	var ri dynamic.ResourceInterface = dyn.Resource(o.gvr)
	if o.namespace != "" {
		ri = dyn.Resource(o.gvr).Namespace(o.namespace)
	}
	start := time.Now()
	_, err = ri.Patch(ctx, o.name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "gitops-resync", Force: ptr.To(true)})
	v := verdict{took: time.Since(start)}
	var status apierrors.APIStatus
	switch {
	case err == nil:
	case strings.Contains(err.Error(), "denied the request") && errors.As(err, &status):
		v.denied, v.message = true, status.Status().Message
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				v.fields = append(v.fields, c.Field)
			}
		}
		slices.Sort(v.fields)
	default:
		v.err = err
	}
	return v
}

// applyBody is obj as an apply configuration: its JSON without the nulls
// of unset fields (the typed structs print some, e.g. a content's
// sourceVolumeMode, and an apply must not set a field to null).
func applyBody(obj any) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return json.Marshal(dropNulls(m))
}

func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
			} else {
				x[k] = dropNulls(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}

// waitResyncCache waits until the webhook's informers hold snapshot
// "ready" and the taken content: the too-small restore and the snapshot
// binding the taken content are denied by a dry run.
func waitResyncCache(t *testing.T, dyn dynamic.Interface, repo []resyncObject) {
	t.Helper()
	for _, field := range []string{"spec.resources.requests", "spec.source.volumeSnapshotContentName"} {
		i := slices.IndexFunc(repo, func(o resyncObject) bool { return o.wantField == field })
		o := repo[i]
		framework.Eventually(t, time.Minute, "the webhook's caches to hold the repository's prerequisites", func() (bool, error) {
			data, err := applyBody(o.obj)
			if err != nil {
				return false, err
			}
			ri := dyn.Resource(o.gvr).Namespace(o.namespace)
			_, err = ri.Patch(context.Background(), o.name, types.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: "gitops-resync", Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), "denied the request"), err
		})
	}
}

// deleteClusterScoped deletes the repository's classes and contents (its
// namespaced objects stay in the test's namespace).
func deleteClusterScoped(dyn dynamic.Interface, repo []resyncObject) {
	for _, o := range repo {
		if o.namespace == "" {
			_ = dyn.Resource(o.gvr).Delete(context.Background(), o.name, metav1.DeleteOptions{})
		}
	}
}
