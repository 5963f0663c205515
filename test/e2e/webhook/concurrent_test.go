package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestConcurrentDefaultClasses: ten default classes for one driver applied
// through the API server at the same instant (a GitOps sync, a Helm release
// of several charts): exactly one is stored, every other create is denied
// with a message naming the default that won.
func TestConcurrentDefaultClasses(t *testing.T) {
	env := framework.Shared(t)
	startWebhook(t, env)
	ctx := context.Background()
	const n = 10
	driver := framework.DriverName("race")

	single := env.Snap.SnapshotV1().VolumeSnapshotClasses()
	raceDefaults(t, "VolumeSnapshotClass", driver+"-", n, func(name string) error {
		_, err := single.Create(ctx, framework.SnapshotClass(name, driver, snapv1.VolumeSnapshotContentDelete, true), metav1.CreateOptions{})
		return err
	}, func(name string) error { return single.Delete(ctx, name, metav1.DeleteOptions{}) })

	group := env.Snap.GroupsnapshotV1().VolumeGroupSnapshotClasses()
	raceDefaults(t, "VolumeGroupSnapshotClass", driver+"-g", n, func(name string) error {
		_, err := group.Create(ctx, framework.GroupSnapshotClass(name, driver, snapv1.VolumeSnapshotContentDelete, true), metav1.CreateOptions{})
		return err
	}, func(name string) error { return group.Delete(ctx, name, metav1.DeleteOptions{}) })
}

// raceDefaults creates n default classes of kind at once, named prefix0 to
// prefix<n-1>, deletes them at cleanup, and checks that exactly one was
// stored.
func raceDefaults(t *testing.T, kind, prefix string, n int, create, remove func(name string) error) {
	t.Helper()
	name := func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }
	created, denials := applyAtOnce(n, func(i int) error { return create(name(i)) })
	t.Cleanup(func() {
		for i := range n {
			_ = remove(name(i))
		}
	})
	checkOneDefault(t, kind, created, denials)
}

// applyAtOnce runs create(i) for i in [0,n) from n goroutines released
// together, and returns how many succeeded and the errors of the others.
func applyAtOnce(n int, create func(i int) error) (int, []error) {
	var mu sync.Mutex
	ok := 0
	var errs []error
	framework.AtOnce(n, func(i int) {
		err := create(i)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			ok++
		} else {
			errs = append(errs, err)
		}
	})
	return ok, errs
}

func checkOneDefault(t *testing.T, kind string, created int, denials []error) {
	t.Helper()
	if created != 1 {
		t.Errorf("%s: %d of %d concurrent default classes for one driver were stored, want 1", kind, created, created+len(denials))
	}
	for _, err := range denials {
		if !strings.Contains(err.Error(), "cannot be the default for driver") {
			t.Errorf("%s: a concurrent default was refused without naming the default that won: %v", kind, err)
		}
	}
}
