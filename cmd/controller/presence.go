package main

import (
	"context"
	"fmt"
	"os"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/sync/csiside"
)

// csiLeaseSelector leaves out the node heartbeats, whose Leases change
// every few seconds and never name a CSI side.
const csiLeaseSelector = "metadata.namespace!=kube-node-lease"

// csiLeases is the binder's informer of CSI side Leases in every namespace
// (pkg/sync/binder/csipresence.go), or nil when --no-csi-side-after is 0 or
// the binder may not list and watch Leases cluster-wide (the community RBAC
// grants them in its own namespace only). It asks the API server
// (SelfSubjectAccessReview, which every authenticated user may create)
// rather than trying: a binder without the right logs that once and sends
// no request that would be refused.
func (o *Options) csiLeases(ctx context.Context, cl *clients) (informers.SharedInformerFactory, coordinformers.LeaseInformer) {
	if o.NoCSISideAfter <= 0 {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	for _, verb := range []string{"list", "watch"} {
		allowed, err := mayOnLeases(ctx, cl, verb)
		if err != nil {
			logger.Info("Cannot tell whether Leases may be read cluster-wide: snapshots of a driver without a CSI side are not reported", "err", err.Error())
			return nil, nil
		}
		if !allowed {
			logger.Info("No right to " + verb + " Leases cluster-wide: snapshots of a driver without a CSI side are not reported " +
				"(grant get, list, watch on coordination.k8s.io leases in a ClusterRole to turn the report on)")
			return nil, nil
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(cl.watchKube, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = csiLeaseSelector }))
	return f, f.Coordination().V1().Leases()
}

// mayOnLeases asks whether this process may verb Leases in every namespace.
func mayOnLeases(ctx context.Context, cl *clients, verb string) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: verb},
	}}
	out, err := cl.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("access review of %s leases: %w", verb, err)
	}
	return out.Status.Allowed, nil
}

// heartbeat is the Lease a CSI side without leader election renews (see
// csiside.Heartbeat), named after its node or host.
func (o *Options) heartbeat(cl *clients, driver string) *csiside.Heartbeat {
	who := o.NodeName
	if who == "" {
		who, _ = os.Hostname()
	}
	id, err := holderIdentity()
	if err != nil {
		id = who
	}
	return &csiside.Heartbeat{
		Kube:      cl.kube,
		Namespace: o.leaseNamespace(),
		Driver:    driver,
		Who:       who,
		Identity:  id,
		Duration:  max(o.LeaderElectionLeaseDuration, 3*time.Second),
	}
}
