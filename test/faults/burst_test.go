package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestBurstDeleteRateLimited deletes M ready snapshots at once while the
// controller talks to the API server at the community's default rate
// (--kube-api-qps=5 --kube-api-burst=10): every snapshot and content must
// go, and so must every backend snapshot. The snapshots are cut by a
// controller without that limit, which is then replaced.
func TestBurstDeleteRateLimited(t *testing.T) {
	rng := newRand(t)
	sz := runSizes()
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "faults"})
	w := newWorld(s)
	claims := (&workload{Claims: 5}).claims(t, s)
	ctx := context.Background()
	start := time.Now()
	names := make([]string, sz.BurstM)
	for i := range names {
		names[i] = fmt.Sprintf("snap-%04d", i)
		if err := w.create(ctx, names[i], claims[rng.IntN(len(claims))]); err != nil {
			t.Fatal(err)
		}
	}
	w.checkInvariants(t, 5*time.Minute)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d snapshots ready in %v", sz.BurstM, time.Since(start).Round(time.Millisecond))

	s.Ctrl.Proc.Stop(10 * time.Second)
	limited := s.StartController(t, append(s.Args, "--kube-api-qps=5", "--kube-api-burst=10")...)
	w.addController(limited)

	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	start = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	work := make(chan string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				if err := w.remove(ctx, name); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	issued := time.Since(start)
	// The rate-limited controller needs a few writes per snapshot.
	w.checkInvariants(t, 2*time.Minute+time.Duration(sz.BurstM)*time.Second)
	if n := len(s.Drv.Created(t)); n != 0 {
		t.Errorf("driver still holds %d snapshots", n)
	}
	t.Logf("%d deletes issued in %v; everything gone %v after the first", sz.BurstM, issued.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
