package csiside

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Heartbeat is the Lease a CSI side without leader election renews, so the
// binder (and snapctl doctor) can tell that a CSI side serves the driver
// (docs/contract.md, "CSI side presence"). With leader election the
// leader's Lease says the same and no heartbeat is needed.
type Heartbeat struct {
	Kube      kubernetes.Interface
	Namespace string
	Driver    string
	// Who is the node (with --node-deployment) or the pod's host name.
	Who      string
	Identity string
	// Duration is the Lease's leaseDurationSeconds; it is renewed every
	// third of it.
	Duration time.Duration
}

// Name is the heartbeat Lease's name.
func (h *Heartbeat) Name() string { return snapshot.HeartbeatLeaseName(h.Driver, h.Who) }

// Run renews the Lease until ctx is done, then deletes it. A failed renewal
// is logged once and retried: the heartbeat never stops the CSI side. A
// refused one (no RBAC for Leases) is retried only every forbiddenRetry,
// so a CSI side without the right sends few refused requests.
func (h *Heartbeat) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", h.Namespace+"/"+h.Name())
	every := max(h.Duration/3, time.Second)
	t := time.NewTimer(every)
	defer t.Stop()
	failing := false
	for {
		err := h.Renew(ctx, time.Now())
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			logger.Error(err, "Cannot renew the CSI side heartbeat Lease; the binder may report that no CSI side runs for the driver "+
				"(grant create, get, update, delete on coordination.k8s.io leases in this namespace)")
			failing = true
		case err == nil && failing:
			logger.Info("CSI side heartbeat Lease renewed again")
			failing = false
		}
		wait := every
		if apierrors.IsForbidden(err) {
			wait = forbiddenRetry
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			h.release(context.WithoutCancel(ctx), logger)
			return
		case <-t.C:
		}
	}
}

// forbiddenRetry is the pause after a renewal the API server refused.
const forbiddenRetry = 5 * time.Minute

// Renew creates or renews the Lease with renewTime now.
func (h *Heartbeat) Renew(ctx context.Context, now time.Time) error {
	leases := h.Kube.CoordinationV1().Leases(h.Namespace)
	renew := metav1.NewMicroTime(now)
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(h.Identity),
		LeaseDurationSeconds: ptr.To(int32(h.Duration / time.Second)),
		RenewTime:            &renew,
	}
	l, err := leases.Get(ctx, h.Name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		spec.AcquireTime = &renew
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: h.Name(), Namespace: h.Namespace,
				Labels: map[string]string{snapshot.LabelCSIHeartbeatDriver: h.Driver}},
			Spec: spec,
		}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating heartbeat Lease %s/%s: %w", h.Namespace, h.Name(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading heartbeat Lease %s/%s: %w", h.Namespace, h.Name(), err)
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[snapshot.LabelCSIHeartbeatDriver] = h.Driver
	spec.AcquireTime = l.Spec.AcquireTime
	l.Spec = spec
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing heartbeat Lease %s/%s: %w", h.Namespace, h.Name(), err)
	}
	return nil
}

// release deletes the Lease at shutdown, so the binder sees at once that
// this CSI side is gone; a failure leaves it to expire.
func (h *Heartbeat) release(ctx context.Context, logger klog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := h.Kube.CoordinationV1().Leases(h.Namespace).Delete(ctx, h.Name(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.V(2).Info("Heartbeat Lease not deleted; it expires", "err", err.Error())
	}
}
