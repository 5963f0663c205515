package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func lease(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: BinderLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(int32(15)),
			RenewTime:            &metav1.MicroTime{Time: time.Now().Add(-renewedAgo)},
		},
	}
}

func TestOurHolderIdentityIsRecognised(t *testing.T) {
	id, err := holderIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if !isOurHolder(id) {
		t.Errorf("%q is not recognised as ours", id)
	}
	// Community holders: the pod name, with or without a suffix of theirs.
	for _, foreign := range []string{"snapshot-controller-7d9f8b6c5-x2x4z", "snapshot-controller-7d9f8b6c5-x2x4z_4a1f0c2e-1b2c", "snapkeeper-controller-abc"} {
		if isOurHolder(foreign) {
			t.Errorf("%q is taken for ours", foreign)
		}
	}
}

func TestForeignLeaseDecision(t *testing.T) {
	ours, _ := holderIdentity()
	foreign := "snapshot-controller-7d9f8b6c5-x2x4z"
	cases := []struct {
		name                  string
		lease                 *coordinationv1.Lease
		leaderElection, force bool
		want                  leaseVerdict
	}{
		{"no lease", nil, false, false, leaseFree},
		{"released", lease("", 0), false, false, leaseFree},
		{"expired foreign, no election", lease(foreign, time.Minute), false, false, leaseFree},
		{"fresh foreign, no election", lease(foreign, time.Second), false, false, leaseForeignRefuse},
		{"fresh foreign, no election, forced", lease(foreign, time.Second), false, true, leaseForeignForced},
		{"fresh foreign, election", lease(foreign, time.Second), true, false, leaseForeignWait},
		{"fresh foreign, election, forced", lease(foreign, time.Second), true, true, leaseForeignWait},
		{"fresh ours, election", lease(ours, time.Second), true, false, leaseFree},
		{"fresh ours, no election", lease(ours, time.Second), false, false, leaseOursRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeLease(inspectLease(tc.lease, time.Now()), tc.leaderElection, tc.force); got != tc.want {
				t.Errorf("verdict = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRefusalNamesTheHolderAndTheWayOut(t *testing.T) {
	foreign := "snapshot-controller-7d9f8b6c5-x2x4z"
	kube := fake.NewClientset(lease(foreign, time.Second))
	o := NewOptions()
	o.LeaderElectionNamespace = "kube-system"
	ran := false
	err := o.withLeaderElection(context.Background(), kube, BinderLease, &health{}, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, errForeignLeader) || ran {
		t.Fatalf("err = %v, ran = %v; want a refusal", err, ran)
	}
	for _, want := range []string{foreign, "kube-system/" + BinderLease, "scale the other controller down", "--leader-election", "--force-despite-foreign-leader"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%v", want, err)
		}
	}
	o.ForceDespiteForeignLeader = true
	if err := o.withLeaderElection(context.Background(), kube, BinderLease, &health{}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("forced: err = %v, ran = %v", err, ran)
	}
}

// Without leader election nothing needs to grant Leases: a Lease we may
// not read does not stop the start.
func TestUnreadableLeaseDoesNotStopTheStart(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, BinderLease, errors.New("no RBAC"))
	})
	o := NewOptions()
	ran := false
	if err := o.withLeaderElection(context.Background(), kube, BinderLease, &health{}, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("err = %v, ran = %v", err, ran)
	}
}
