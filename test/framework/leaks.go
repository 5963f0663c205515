package framework

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackendMatchesContents compares the snapshots the driver holds (without
// the mock's built-ins) with the handles of the driver's contents.
func (e *Env) BackendMatchesContents(ctx context.Context, drv *CSIDriver) (bool, error) {
	backend, err := drv.Snapshots(ctx)
	if err != nil {
		return false, err
	}
	var have []string
	for _, b := range backend {
		have = append(have, b.ID)
	}
	list, err := e.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	var want []string
	for _, c := range list.Items {
		if c.Spec.Driver != drv.Name {
			continue
		}
		switch {
		case c.Status != nil && c.Status.SnapshotHandle != nil:
			want = append(want, *c.Status.SnapshotHandle)
		case c.Spec.Source.SnapshotHandle != nil:
			want = append(want, *c.Spec.Source.SnapshotHandle)
		}
	}
	sort.Strings(have)
	sort.Strings(want)
	return slices.Equal(have, want), fmt.Errorf("backend %v, content handles %v", have, want)
}

// WaitBackendMatchesContents asserts that the driver holds exactly the
// snapshots its contents point at: no leak, no duplicate. It waits for
// in-flight work to settle, then checks that the equality holds steadily (a
// late duplicate create would break it).
func (e *Env) WaitBackendMatchesContents(t T, drv *CSIDriver) {
	t.Helper()
	check := func() (bool, error) { return e.BackendMatchesContents(context.Background(), drv) }
	Eventually(t, 30*time.Second, "backend == content handles", check)
	time.Sleep(time.Second)
	if ok, err := check(); !ok {
		t.Fatalf("backend and contents diverged again: %v", err)
	}
}
