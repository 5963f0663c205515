package csiside

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

func TestHeartbeatCreatesRenewsAndReleases(t *testing.T) {
	kube := kubefake.NewClientset()
	h := &Heartbeat{Kube: kube, Namespace: "csi", Driver: "hostpath.csi.k8s.io", Who: "Node-1", Identity: "pod_snapkeeper_x", Duration: 15 * time.Second}
	if got, want := h.Name(), "snapkeeper-csi-hostpath-csi-k8s-io-node-1"; got != want {
		t.Fatalf("name = %q, want %q", got, want)
	}
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	if err := h.Renew(ctx, t0); err != nil {
		t.Fatal(err)
	}
	if err := h.Renew(ctx, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	l, err := kube.CoordinationV1().Leases("csi").Get(ctx, h.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := snapshot.LeaseDriverKey(l); !ok || k != snapshot.DriverLeaseKey(h.Driver) {
		t.Errorf("the binder would not find the Lease: %v %v (labels %v)", k, ok, l.Labels)
	}
	until, ok := snapshot.LeaseFreshUntil(l)
	if !ok || !until.Equal(l.Spec.RenewTime.Add(30*time.Second)) || !l.Spec.AcquireTime.Time.Before(l.Spec.RenewTime.Time) {
		t.Errorf("lease spec = %+v (fresh until %v)", l.Spec, until)
	}
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	h.Run(ctx2) // renews once, then releases
	if _, err := kube.CoordinationV1().Leases("csi").Get(ctx, h.Name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease not released at shutdown: %v", err)
	}
}

func TestSecretReadErrorNamesTheRuleWhenForbidden(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	forbidden := apierrors.NewForbidden(gr, "creds", errors.New(`User "system:serviceaccount:kube-system:csi-snapshotter" cannot get resource "secrets" in API group "" in the namespace "secrets"`))
	forbidden.ErrStatus.Message = `secrets "creds" is forbidden: User "system:serviceaccount:kube-system:csi-snapshotter" cannot get resource "secrets" in API group "" in the namespace "secrets"`
	err := secretReadError("secrets", "creds", forbidden)
	for _, want := range []string{`resources: ["secrets"], verbs: ["get"]`, "namespace secrets", "service account kube-system/csi-snapshotter",
		"--serviceaccount=kube-system:csi-snapshotter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !apierrors.IsForbidden(err) {
		t.Error("the API error is not wrapped")
	}
	other := secretReadError("secrets", "creds", apierrors.NewNotFound(gr, "creds"))
	if strings.Contains(other.Error(), "fix:") {
		t.Errorf("not-found error got a fix: %v", other)
	}
	unknown := secretGrantHint("ns", "forbidden")
	if !strings.Contains(unknown, "the CSI side's service account") {
		t.Errorf("hint without a user = %q", unknown)
	}
}
