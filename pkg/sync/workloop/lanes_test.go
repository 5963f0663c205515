package workloop

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func popAll(l *lanes) []string {
	var out []string
	for l.Len() > 0 {
		out = append(out, l.Pop())
	}
	return out
}

func TestLanesFIFOWithoutUrgentKeys(t *testing.T) {
	l := newLanes()
	for _, k := range []string{"a", "b", "c"} {
		l.Push(k)
	}
	l.Touch("a") // not urgent: stays where it is
	if got := popAll(l); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("order %v, want FIFO", got)
	}
}

func TestLanesUrgentGoesFirst(t *testing.T) {
	l := newLanes()
	l.Push("a")
	l.Push("b")
	l.mark("c")
	l.Push("c")  // urgent when queued
	l.mark("b")  // made urgent while it waits
	l.Touch("b") // the queue tells the lanes of the second add
	l.Push("d")
	got := popAll(l)
	if want := []string{"c", "b", "a", "d"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// Handed out: no longer urgent, and the stale slow entry of b is gone.
	l.Push("b")
	l.Push("e")
	if got := popAll(l); !slices.Equal(got, []string{"b", "e"}) {
		t.Fatalf("after a round: %v, want [b e]", got)
	}
}

// TestAddUrgentOvertakesABacklog: through a real loop, a key added urgently
// behind a backlog is synced before the backlog.
func TestAddUrgentOvertakesABacklog(t *testing.T) {
	var mu sync.Mutex
	var order []string
	release := make(chan struct{})
	l := NewLoop("test", Backoff{}, func(_ context.Context, key string) (Result, error) {
		if key == "first" {
			<-release // the only worker is busy while the backlog builds
		}
		mu.Lock()
		order = append(order, key)
		mu.Unlock()
		return Result{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Add("first")
	go l.Run(ctx, 1)
	for l.Len() != 0 {
		time.Sleep(time.Millisecond)
	}
	for _, k := range []string{"b1", "b2", "b3"} {
		l.Add(k)
	}
	l.AddUrgent("ready")
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("synced %v", order)
		}
		time.Sleep(time.Millisecond)
	}
	if want := []string{"first", "ready", "b1", "b2", "b3"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}
