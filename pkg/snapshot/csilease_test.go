package snapshot

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestCSILeaseNames(t *testing.T) {
	if got := CSILeaseName("ebs.csi.aws.com"); got != "external-snapshotter-leader-ebs-csi-aws-com" {
		t.Errorf("CSILeaseName = %q", got)
	}
	if got := HeartbeatLeaseName("ebs.csi.aws.com", "Node_1"); got != "snapkeeper-csi-ebs-csi-aws-com-node-1" {
		t.Errorf("HeartbeatLeaseName = %q", got)
	}
	if got := HeartbeatLeaseName("d", strings.Repeat("x", 300)); len(got) != 253 {
		t.Errorf("long name not cut: %d", len(got))
	}
	for _, tc := range []struct {
		lease coordinationv1.Lease
		key   string
		ok    bool
	}{
		{coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "external-snapshotter-leader-a-b"}}, "a-b", true},
		{coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{LabelCSIHeartbeatDriver: "a.b"}}}, "a-b", true},
		{coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "snapshot-controller-leader"}}, "", false},
	} {
		if k, ok := LeaseDriverKey(&tc.lease); k != tc.key || ok != tc.ok {
			t.Errorf("LeaseDriverKey(%s) = %q, %v", tc.lease.Name, k, ok)
		}
	}
}

func TestLeaseFreshUntil(t *testing.T) {
	now := time.Now()
	renew := metav1.NewMicroTime(now)
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("h"), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &renew}}
	if until, ok := LeaseFreshUntil(l); !ok || !until.Equal(renew.Add(30*time.Second)) {
		t.Errorf("fresh until %v %v", until, ok)
	}
	l.Spec.HolderIdentity = ptr.To("") // released
	if _, ok := LeaseFreshUntil(l); ok {
		t.Error("a released Lease counts as alive")
	}
}
