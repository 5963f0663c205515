package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// workload is a seeded stream of creates and deletes: Creates
// VolumeSnapshots of Claims bound claims (or other objects, see Create),
// Deletes of them (Deletes <= Creates) picked at random among those
// created so far, ready or not, in a random interleaving, with a random
// pause of up to 2*Pause between operations.
type workload struct {
	Creates, Deletes, Claims int
	Pause                    time.Duration
	// Create and Remove default to the world's VolumeSnapshot create and
	// delete; Name formats the i-th object's name, default "snap-%04d".
	Create func(ctx context.Context, name, source string) error
	Remove func(ctx context.Context, name string) error
	Name   string
	// done counts the operations issued so far (creates and deletes).
	done atomic.Int64
}

// ops is the number of operations the workload issues.
func (wl *workload) ops() int { return wl.Creates + wl.Deletes }

// claims creates the workload's bound claims.
func (wl *workload) claims(t *testing.T, s *framework.Scenario) []string {
	t.Helper()
	var out []string
	for i := range wl.Claims {
		name := fmt.Sprintf("data-%d", i)
		s.PVC(t, name)
		out = append(out, name)
	}
	return out
}

// run issues the operations; it uses no testing.T, so it may run in a
// goroutine of its own.
func (wl *workload) run(ctx context.Context, w *world, rng *rand.Rand, claims []string) error {
	create, remove, format := wl.Create, wl.Remove, wl.Name
	if create == nil {
		create, remove = w.create, w.remove
	}
	if format == "" {
		format = "snap-%04d"
	}
	var alive []string
	created, deleted := 0, 0
	for created < wl.Creates || deleted < wl.Deletes {
		leftC, leftD := wl.Creates-created, wl.Deletes-deleted
		doCreate := leftD == 0 || len(alive) == 0 || (leftC > 0 && rng.IntN(leftC+leftD) < leftC)
		if doCreate {
			name := fmt.Sprintf(format, created)
			if err := create(ctx, name, claims[rng.IntN(len(claims))]); err != nil {
				return err
			}
			alive = append(alive, name)
			created++
		} else {
			i := rng.IntN(len(alive))
			name := alive[i]
			alive = append(alive[:i], alive[i+1:]...)
			if err := remove(ctx, name); err != nil {
				return err
			}
			deleted++
		}
		wl.done.Add(1)
		if wl.Pause > 0 {
			select {
			case <-time.After(time.Duration(rng.Int64N(int64(2 * wl.Pause)))):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// start runs the workload in a goroutine; the channel yields its result.
func (wl *workload) start(ctx context.Context, w *world, rng *rand.Rand, claims []string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx, w, rng, claims) }()
	return done
}

// child derives an independent generator from rng, for a goroutine.
func child(rng *rand.Rand) *rand.Rand { return rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())) }
