package admission

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// postDefaults sends one CREATE review per class at the same instant and
// returns how many were allowed.
func postDefaults(t *testing.T, h http.Handler, resource string, classes []any, dryRun bool) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for _, c := range classes {
		r := newReview(t, resource, c)
		r.Request.DryRun = &dryRun
		body := marshal(t, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, out := post(t, h, body, "application/json")
			mu.Lock()
			defer mu.Unlock()
			if out.Response.Allowed {
				allowed++
			}
		}()
	}
	wg.Wait()
	return allowed
}

// The API server stores a class only after the webhook admitted it, so ten
// defaults applied at once all find no default in a fresh read; the
// handler still admits only one of them.
func TestConcurrentDefaultClassesAdmitOne(t *testing.T) {
	for name, kind := range map[string]struct {
		resource string
		class    func(n int) any
	}{
		"VolumeSnapshotClass":      {"volumesnapshotclasses", func(n int) any { return NewClass(fmt.Sprintf("c%d", n), AsDefault()) }},
		"VolumeGroupSnapshotClass": {"volumegroupsnapshotclasses", func(n int) any { return NewGroupClass(fmt.Sprintf("g%d", n), AsGroupDefault()) }},
	} {
		t.Run(name, func(t *testing.T) {
			l := &validation.StaticLookup{} // stays empty: nothing is ever stored
			h := NewHandler(func(context.Context) validation.Lookup { return l }, validation.Options{}, 1<<20, nil)
			var classes []any
			for i := range 10 {
				classes = append(classes, kind.class(i))
			}
			if got := postDefaults(t, h.Endpoint(""), kind.resource, classes, true); got != 10 {
				t.Fatalf("dry runs: %d of 10 admitted, want 10 (a dry run claims nothing)", got)
			}
			if got := postDefaults(t, h.Endpoint(""), kind.resource, classes, false); got != 1 {
				t.Fatalf("%d of 10 concurrent default classes admitted, want 1", got)
			}
		})
	}
}

// A claim stands in for its class only until the API server lists the
// class, or until it expires (the create failed after admission).
func TestDefaultClaimEndsWhenListedOrExpired(t *testing.T) {
	l := &validation.StaticLookup{FreshClasses: []*snapv1.VolumeSnapshotClass{}}
	d := newDefaultClaims(time.Minute)
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	judge := func(c *snapv1.VolumeSnapshotClass) bool {
		var ok bool
		d.judge(c, false, l, func(l validation.Lookup) bool {
			errs, _, err := validation.Validator{Lookup: l}.Validate(validation.Operation(admissionv1.Create), c, nil)
			ok = err == nil && len(errs) == 0
			return ok
		})
		return ok
	}
	if !judge(NewClass("a", AsDefault())) {
		t.Fatal("first default refused")
	}
	if judge(NewClass("b", AsDefault())) {
		t.Fatal("second default admitted while the first is claimed")
	}
	// The API server now lists "a" as not default (its annotation was
	// removed right after): the claim ends and "b" may be the default.
	l.FreshClasses = []*snapv1.VolumeSnapshotClass{NewClass("a")}
	if judge(NewClass("b", AsDefault())) {
		t.Fatal("claim of a ended too early: a is listed, but not as a default")
	}
	now = now.Add(2 * time.Minute)
	if !judge(NewClass("b", AsDefault())) {
		t.Fatal("expired claim of a still refuses b")
	}
	l.FreshClasses = []*snapv1.VolumeSnapshotClass{NewClass("b", AsDefault())}
	if !judge(NewClass("b", AsDefault())) {
		t.Fatal("b listed as the default: re-applying b refused")
	}
	if len(d.single) > 1 {
		t.Fatalf("more than one claim for one driver: %v", d.single)
	}
}
