package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// electionOptions: leader election with short timings.
func electionOptions() *Options {
	o := NewOptions()
	o.LeaderElection = true
	o.LeaderElectionNamespace = "kube-system"
	o.LeaderElectionLeaseDuration = 2 * time.Second
	o.LeaderElectionRenewDeadline = time.Second
	o.LeaderElectionRetryPeriod = 100 * time.Millisecond
	return o
}

func holderOf(t *testing.T, kube *fake.Clientset) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases("kube-system").Get(context.Background(), BinderLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// A rolling update stops the leader with SIGTERM: its work must end before
// the Lease is given up (no two leaders act at once), and the Lease must
// then be given up, not left to expire (the new replica would wait a whole
// lease duration with no controller working).
func TestALeaderStoppedReleasesTheLeaseOnlyAfterItsWorkEnded(t *testing.T) {
	kube := fake.NewClientset()
	o := electionOptions()
	ctx, stop := context.WithCancel(context.Background())
	started := make(chan struct{})
	var heldWhenWorkEnded string
	done := make(chan error, 1)
	go func() {
		done <- o.withLeaderElection(ctx, kube, BinderLease, &health{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(200 * time.Millisecond) // work that takes a moment to wind down
			heldWhenWorkEnded = holderOf(t, kube)
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped leader returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stopped leader did not return")
	}
	if !isOurHolder(heldWhenWorkEnded) {
		t.Errorf("the Lease was held by %q when the work ended, want this process (released too early)", heldWhenWorkEnded)
	}
	if h := holderOf(t, kube); h != "" {
		t.Errorf("after the leader stopped the Lease is held by %q, want released", h)
	}
}

// A replica stopped while it waits for the Lease never starts its work,
// and leaves the holder's Lease alone.
func TestAReplicaStoppedWhileWaitingNeverWorks(t *testing.T) {
	other := "other-pod" + holderMark + "abcde"
	kube := fake.NewClientset(lease(other, 0))
	o := electionOptions()
	o.LeaderElectionLeaseDuration = time.Minute // the holder stays fresh
	ctx, stop := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer stop()
	var ran atomic.Bool
	err := o.withLeaderElection(ctx, kube, BinderLease, &health{}, func(context.Context) error { ran.Store(true); return nil })
	if err != nil || ran.Load() {
		t.Fatalf("err = %v, ran = %v; want nil, false", err, ran.Load())
	}
	if h := holderOf(t, kube); h != other {
		t.Errorf("Lease holder = %q, want %q untouched", h, other)
	}
}

// A leader that cannot renew loses the Lease: its work stops and the
// process ends with an error naming the Lease (it restarts and re-syncs).
func TestALeaderThatLosesTheLeaseStopsWithAnError(t *testing.T) {
	kube := fake.NewClientset()
	var failRenewals atomic.Bool
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failRenewals.Load() {
			return true, nil, errors.New("API server unreachable")
		}
		return false, nil, nil
	})
	o := electionOptions()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := o.withLeaderElection(ctx, kube, BinderLease, &health{}, func(ctx context.Context) error {
		failRenewals.Store(true)
		<-ctx.Done()
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "lost the "+BinderLease+" lease") {
		t.Fatalf("err = %v, want a lost-Lease error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the work only stopped at the test's deadline")
	}
}

// Once the owner has begun to stop, a late OnStartedLeading runs nothing.
func TestNoWorkStartsAfterStoppingBegan(t *testing.T) {
	g := newLeaderGuard()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.wait(stopped, BinderLease); err != nil {
		t.Fatal(err)
	}
	ran := false
	g.run(stopped, context.Background(), func(context.Context) error { ran = true; return nil })
	if ran {
		t.Error("work started after the guard stopped")
	}
}

// On SIGTERM the process waits for every component to return (their work
// stopped, their Leases released) before it exits.
func TestTheProcessWaitsForEveryComponentToStop(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	inner, cancel := context.WithCancel(ctx)
	errc := make(chan error, 2)
	var stopped atomic.Int32
	for range 2 {
		go func() {
			<-inner.Done()
			time.Sleep(100 * time.Millisecond) // releasing the Lease
			stopped.Add(1)
			errc <- nil
		}()
	}
	stop()
	if err := awaitComponents(inner, cancel, errc, 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := stopped.Load(); n != 2 {
		t.Errorf("returned with %d of 2 components stopped", n)
	}
}

// A failing component stops the others; its error is the process's, once
// they have stopped.
func TestAFailingComponentStopsTheOthers(t *testing.T) {
	inner, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	var otherStopped atomic.Bool
	go func() { errc <- errors.New("CSI driver gone") }()
	go func() {
		<-inner.Done()
		otherStopped.Store(true)
		errc <- nil
	}()
	err := awaitComponents(inner, cancel, errc, 2, 10*time.Second)
	if err == nil || err.Error() != "CSI driver gone" || !otherStopped.Load() {
		t.Fatalf("err = %v, other stopped = %v; want the failure after the other stopped", err, otherStopped.Load())
	}
}

// A component that does not stop in time does not keep the process alive.
func TestAStuckComponentDoesNotHoldTheExit(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	inner, cancel := context.WithCancel(ctx)
	stop()
	start := time.Now()
	if err := awaitComponents(inner, cancel, make(chan error), 1, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("waited %s for a stuck component, bound 200ms", d)
	}
}
