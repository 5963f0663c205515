package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// groupsLater serves the group API once served is set.
type groupsLater struct {
	discovery.DiscoveryInterface
	served atomic.Bool
}

func (d *groupsLater) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv == groupVersion && d.served.Load() {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "volumegroupsnapshots"}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "groupsnapshot.storage.k8s.io"}, gv)
}

func TestTheGroupCRDsAppearingEndsTheProcess(t *testing.T) {
	dc := &groupsLater{DiscoveryInterface: kubefake.NewClientset().Discovery()}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- watchGroupCRDs(ctx, dc, 10*time.Millisecond) }()
	select {
	case err := <-done:
		t.Fatalf("returned %v before the group CRDs were served", err)
	case <-time.After(100 * time.Millisecond):
	}
	dc.served.Store(true)
	select {
	case err := <-done:
		if !errors.Is(err, errGroupCRDsServed) {
			t.Fatalf("err = %v, want errGroupCRDsServed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the served group CRDs were not noticed")
	}
}

func TestTheGroupCRDWatchEndsQuietlyWithTheProcess(t *testing.T) {
	dc := kubefake.NewClientset().Discovery()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := watchGroupCRDs(ctx, dc, time.Hour); err != nil {
		t.Fatalf("err = %v at shutdown, want nil", err)
	}
}
