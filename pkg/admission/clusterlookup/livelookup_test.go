package clusterlookup

import (
	"context"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// A group applied right after its claims: the caches do not hold them yet,
// the live reads do.
func TestReadClaimsLiveSeesWhatTheCacheDoesNotYet(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}}
	other := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"app": "web"}}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}}
	kube := kubefake.NewClientset(claim, other, pv)
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	snaps := snapfake.NewSimpleClientset()
	// Factories never started: empty caches.
	l := New(snapinformers.NewSharedInformerFactory(snaps, 0), informers.NewSharedInformerFactory(kube, 0), snaps, nil)

	cached := l.ForRequest(context.Background())
	if got, err := cached.ListPVCs("ns", labels.SelectorFromSet(labels.Set{"app": "db"})); err != nil || len(got) != 0 {
		t.Fatalf("cache only: %d claims, %v; want 0 (nothing cached)", len(got), err)
	}

	live := l.ReadClaimsLive(kube).ForRequest(context.Background())
	got, err := live.ListPVCs("ns", labels.SelectorFromSet(labels.Set{"app": "db"}))
	if err != nil || len(got) != 1 || got[0].Name != "data" {
		t.Fatalf("live: %v, %v; want claim data only", got, err)
	}
	if v, err := live.GetPV("pv-data"); err != nil || v == nil {
		t.Fatalf("live GetPV: %v, %v; want the volume", v, err)
	}
	if v, err := live.GetPV("missing"); err != nil || v != nil {
		t.Fatalf("live GetPV of a missing volume: %v, %v; want nil, nil", v, err)
	}
}

// A class applied in the same sync as the snapshot that names it: the
// cache does not hold it yet, the API server does.
func TestClassReadLiveOnACacheMiss(t *testing.T) {
	kube := kubefake.NewClientset()
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	snaps := snapfake.NewSimpleClientset(&snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Driver: "d"})
	l := New(snapinformers.NewSharedInformerFactory(snaps, 0), informers.NewSharedInformerFactory(kube, 0), snaps, nil)
	r := l.ForRequest(context.Background())
	if c, err := r.GetClass("gold"); err != nil || c == nil || c.Driver != "d" {
		t.Fatalf("GetClass on a cache miss: %v, %v; want the API server's class", c, err)
	}
	if c, err := r.GetClass("missing"); err != nil || c != nil {
		t.Fatalf("GetClass of a missing class: %v, %v; want nil, nil", c, err)
	}
}
