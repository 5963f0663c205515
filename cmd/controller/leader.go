package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// holderMark is part of the holderIdentity of every Lease we hold:
// "<hostname>_snapkeeper_<random>". Pod hostnames never contain "_", and
// the community components use their hostname (plus a suffix of their own),
// so the mark tells our holders from theirs. A label would not do: labels
// stay on the Lease when another holder takes it over.
const holderMark = "_snapkeeper_"

// holderIdentity is the identity this process uses in Leases.
func holderIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return host + holderMark + utilrand.String(5), nil
}

// isOurHolder reports whether a Lease holderIdentity is one of ours.
func isOurHolder(id string) bool { return strings.Contains(id, holderMark) }

// leaseHolder is what a Lease says about its holder.
type leaseHolder struct {
	Identity string
	// Fresh: renewed (or acquired) within its lease duration, so the
	// holder is presumably alive and working.
	Fresh bool
	Age   time.Duration // since the last renewal
}

func inspectLease(l *coordinationv1.Lease, now time.Time) leaseHolder {
	if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return leaseHolder{}
	}
	h := leaseHolder{Identity: *l.Spec.HolderIdentity}
	last := l.Spec.RenewTime
	if last == nil {
		last = l.Spec.AcquireTime
	}
	if last == nil || l.Spec.LeaseDurationSeconds == nil {
		return h
	}
	h.Age = now.Sub(last.Time)
	h.Fresh = h.Age < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
	return h
}

// leaseVerdict is what to do about the holder of our Lease at start-up.
type leaseVerdict int

const (
	leaseFree          leaseVerdict = iota // nobody, an expired holder, or one of ours with leader election
	leaseOursRunning                       // one of ours holds it, and we run without leader election
	leaseForeignWait                       // a foreign holder; leader election waits for it
	leaseForeignForced                     // a foreign holder; we run anyway (--force-despite-foreign-leader)
	leaseForeignRefuse                     // a foreign holder; refuse to start
)

// judgeLease decides how to start given the current holder of the Lease:
// a fresh holder that is not ours is another snapshot controller (the
// community one, typically) acting on the same objects. With leader
// election we wait for it like any candidate, but say why; without it we
// would run next to it, so we refuse unless forced.
func judgeLease(h leaseHolder, leaderElection, force bool) leaseVerdict {
	switch {
	case h.Identity == "" || !h.Fresh:
		return leaseFree
	case isOurHolder(h.Identity):
		if leaderElection {
			return leaseFree
		}
		return leaseOursRunning
	case leaderElection:
		return leaseForeignWait
	case force:
		return leaseForeignForced
	default:
		return leaseForeignRefuse
	}
}

// foreignLeaseMessage explains a foreign holder and what to do about it.
func foreignLeaseMessage(lease string, h leaseHolder, v leaseVerdict) string {
	what := fmt.Sprintf("Lease %s is held by %q (renewed %s ago), which is not a snapkeeper controller: "+
		"most likely the community snapshot controller, still running", lease, h.Identity, h.Age.Round(time.Second))
	switch v {
	case leaseForeignWait:
		return what + ". Waiting for it to release the Lease or let it expire, as leader election does; " +
			"scale the other controller down (its pod is named like the holder) to hand over"
	case leaseForeignForced:
		return what + ". Running anyway because of --force-despite-foreign-leader: both controllers act on the same objects " +
			"until the other one is scaled down"
	default:
		return what + ". Refusing to start next to it without leader election: scale the other controller down " +
			"(its pod is named like the holder) and let the Lease expire, start with --leader-election to wait for the Lease, " +
			"or pass --force-despite-foreign-leader to run next to it anyway"
	}
}

// errForeignLeader is returned when we refuse to start next to a foreign
// holder of our Lease.
var errForeignLeader = errors.New("another snapshot controller holds the Lease")

// checkLease looks at the current holder of Lease name before we work and
// acts on judgeLease. A Lease we may not read is no reason not to start.
func (o *Options) checkLease(ctx context.Context, kube kubernetes.Interface, name string) error {
	logger := klog.FromContext(ctx)
	ns := o.leaseNamespace()
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		// Normal without leader election: nothing needs to grant Leases then.
		logger.V(2).Info("Not allowed to read the Lease: no check for another controller", "lease", ns+"/"+name, "err", err.Error())
		return nil
	case err != nil:
		logger.Info("Cannot read the Lease to check for another controller; starting anyway", "lease", ns+"/"+name, "err", err.Error())
		return nil
	}
	h := inspectLease(l, time.Now())
	v := judgeLease(h, o.LeaderElection, o.ForceDespiteForeignLeader)
	lease := ns + "/" + name
	switch v {
	case leaseOursRunning:
		logger.Info("Another snapkeeper controller holds the Lease with leader election, and this one runs without it: both act",
			"lease", lease, "holder", h.Identity)
	case leaseForeignWait, leaseForeignForced:
		logger.Error(nil, foreignLeaseMessage(lease, h, v), "lease", lease, "holder", h.Identity)
	case leaseForeignRefuse:
		return fmt.Errorf("%w: %s", errForeignLeader, foreignLeaseMessage(lease, h, v))
	}
	return nil
}

// withLeaderElection runs run only while this process holds the Lease name;
// without --leader-election it runs at once. Either way a fresh Lease held
// by a foreign controller is reported first (see judgeLease). Losing the
// lease ends the process (a fresh start re-syncs from the caches of the new
// leader). When ctx ends (SIGTERM) while leading, run is stopped and waited
// for, and only then is the Lease released: the replica waiting for it (a
// rolling update) takes over within its retry period instead of a whole
// lease duration, and never while this one still writes.
func (o *Options) withLeaderElection(ctx context.Context, kube kubernetes.Interface, name string, h *health, run func(context.Context) error) error {
	if err := o.checkLease(ctx, kube, name); err != nil {
		return err
	}
	if !o.LeaderElection {
		return run(ctx)
	}
	id, err := holderIdentity()
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaseNamespace(), Name: name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		Labels:     o.LeaderElectionLabels.Map(),
	}
	logger := klog.FromContext(ctx)
	watchdog := leaderelection.NewLeaderHealthzAdaptor(o.LeaderElectionRenewDeadline)
	h.addWatchdog(watchdog)
	guard := newLeaderGuard()
	// The elector's own context ends only after run has returned (see
	// leaderGuard): with ReleaseOnCancel it then gives the Lease up.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaderElectionLeaseDuration,
		RenewDeadline:   o.LeaderElectionRenewDeadline,
		RetryPeriod:     o.LeaderElectionRetryPeriod,
		ReleaseOnCancel: true,
		Name:            name,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leCtx context.Context) { guard.run(ctx, leCtx, run) },
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				if leader != id {
					logger.Info("Lease held by another process", "lease", lock.LeaseMeta.Namespace+"/"+name,
						"holder", leader, "snapkeeper", isOurHolder(leader))
				}
			},
		},
	})
	if err != nil {
		return err
	}
	logger.Info("Waiting for leadership", "lease", lock.LeaseMeta.Namespace+"/"+name, "identity", id)
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(electCtx)
	}()
	err = guard.wait(ctx, name)
	stopElecting()
	select {
	case <-elected:
	case <-time.After(o.LeaderElectionRenewDeadline):
		logger.Info("Exiting before the Lease was released: the next leader waits for it to expire", "lease", lock.LeaseMeta.Namespace+"/"+name)
	}
	return err
}
