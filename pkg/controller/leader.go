package controller

import (
	"context"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// withLeaderElection runs run only while this process holds the Lease name;
// without --leader-election it runs at once. Losing the lease ends the
// process (a fresh start re-syncs from the caches of the new leader).
func (o *Options) withLeaderElection(ctx context.Context, kube kubernetes.Interface, name string, h *health, run func(context.Context) error) error {
	if !o.LeaderElection {
		return run(ctx)
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(o.LeaderElectionLabels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaseNamespace(), Name: name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id + "_" + utilrand.String(5)},
		Labels:     labels,
	}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(o.LeaderElectionRenewDeadline)
	h.addWatchdog(watchdog)
	errc := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaderElectionLeaseDuration,
		RenewDeadline:   o.LeaderElectionRenewDeadline,
		RetryPeriod:     o.LeaderElectionRetryPeriod,
		ReleaseOnCancel: true,
		Name:            name,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { errc <- run(ctx) },
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					errc <- fmt.Errorf("lost the %s lease", name)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Waiting for leadership", "lease", lock.LeaseMeta.Namespace+"/"+name)
	go le.Run(ctx)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
}
