package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BindPendingClaim is BindClaim for callers without a testing.T (steps
// that return errors): it binds the existing Pending claim ns/name to a
// new CSI PV "pv-<ns>-<name>" of o.
func (e *Env) BindPendingClaim(ctx context.Context, ns, name string, o PVCOptions) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("bind claim %s/%s: %w", ns, name, err)
	}
	return e.bindClaim(ctx, pvc, o)
}
