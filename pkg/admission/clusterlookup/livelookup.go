package clusterlookup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// ReadClaimsLive makes the lookup read the claims a VolumeGroupSnapshot's
// selector matches from the API server instead of the informer cache, and a
// volume the cache does not hold yet too. A group is usually applied right
// after its claims are created or labelled (one Helm release, one kubectl
// apply), when the cache may not show them yet: the driver and binding rules
// would then judge an older set of claims, and admit a group that mixes
// drivers. Groups are rare, so the extra read costs little; when it fails
// the cache answers. It returns l.
func (l *Lookup) ReadClaimsLive(kube kubernetes.Interface) *Lookup {
	l.kube = kube
	return l
}

func (r requestLookup) listPVCsLive(namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	ctx, cancel := context.WithTimeout(r.ctx, freshReadTimeout)
	defer cancel()
	list, err := r.l.kube.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumeClaims in %q: %w", namespace, err)
	}
	out := make([]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (r requestLookup) getPVLive(name string) (*corev1.PersistentVolume, error) {
	ctx, cancel := context.WithTimeout(r.ctx, freshReadTimeout)
	defer cancel()
	pv, err := r.l.kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading PersistentVolume %q: %w", name, err)
	}
	return pv, nil
}
