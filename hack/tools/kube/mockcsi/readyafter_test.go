package main

import (
	"context"
	"testing"
	"time"
)

// A snapshot under ReadyAfter answers not ready until the time has passed
// since the first answer about it, however often it is asked.
func TestReadyAfterHoldsReadinessForATime(t *testing.T) {
	h := newHarness(t, Rule{Method: "*", ReadyAfter: Duration(400 * time.Millisecond)})
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < 3; i++ {
		resp, err := h.create(ctx, "slow")
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) < 350*time.Millisecond && resp.GetSnapshot().GetReadyToUse() {
			t.Fatalf("answer %d after %s is ready; want not ready for 400ms", i+1, time.Since(start))
		}
	}
	time.Sleep(time.Until(start.Add(450 * time.Millisecond)))
	resp, err := h.create(ctx, "slow")
	if err != nil || !resp.GetSnapshot().GetReadyToUse() {
		t.Errorf("after 450ms: %v, %v; want ready", resp, err)
	}
}

func TestReadyAfterMaxSpreadsTheWait(t *testing.T) {
	r := Rule{ReadyAfter: Duration(5 * time.Second), ReadyAfterMax: Duration(30 * time.Second)}
	seen := map[time.Duration]bool{}
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		d := r.readyDelay(id)
		if d < 5*time.Second || d > 30*time.Second || d != r.readyDelay(id) {
			t.Errorf("delay of %s = %s, want a fixed value in [5s, 30s]", id, d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("every id waits the same: %v", seen)
	}
	if err := (Rule{Method: "*", ReadyAfter: Duration(time.Second), ReadyAfterMax: Duration(time.Millisecond)}).validate(); err == nil {
		t.Error("readyAfterMax below readyAfter validated")
	}
}
