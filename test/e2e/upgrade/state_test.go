package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// state is what the API server holds at one moment: every snapshot object
// of the test by "Kind/name" with its resourceVersion (a write that changed
// an object changed its resourceVersion), and the snapshots and contents
// themselves.
type state struct {
	rv       map[string]string
	snaps    map[string]*snapv1.VolumeSnapshot        // by name, in c.apps
	contents map[string]*snapv1.VolumeSnapshotContent // by name
}

func (c *cluster) read(t *testing.T) *state {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &state{rv: map[string]string{}, snaps: map[string]*snapv1.VolumeSnapshot{}, contents: map[string]*snapv1.VolumeSnapshotContent{}}
	vs, err := c.env.Snap.SnapshotV1().VolumeSnapshots(c.apps).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range vs.Items {
		s.snaps[vs.Items[i].Name] = &vs.Items[i]
		s.rv["VolumeSnapshot/"+vs.Items[i].Name] = vs.Items[i].ResourceVersion
	}
	vsc, err := c.env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range vsc.Items {
		s.contents[vsc.Items[i].Name] = &vsc.Items[i]
		s.rv["VolumeSnapshotContent/"+vsc.Items[i].Name] = vsc.Items[i].ResourceVersion
	}
	groups, err := c.env.Snap.GroupsnapshotV1().VolumeGroupSnapshots(c.apps).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Items {
		s.rv["VolumeGroupSnapshot/"+g.Name] = g.ResourceVersion
	}
	gcs, err := c.env.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gcs.Items {
		s.rv["VolumeGroupSnapshotContent/"+g.Name] = g.ResourceVersion
	}
	return s
}

// content is the content snapshot name is bound to, or nil.
func (s *state) content(name string) *snapv1.VolumeSnapshotContent {
	vs := s.snaps[name]
	if vs == nil || vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
		return nil
	}
	return s.contents[*vs.Status.BoundVolumeSnapshotContentName]
}

// ready: the snapshot and its content say readyToUse.
func (s *state) ready(name string) (bool, string) {
	vs, vsc := s.snaps[name], s.content(name)
	switch {
	case vs == nil || vsc == nil:
		return false, "no snapshot or no bound content"
	case vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse:
		return false, "snapshot not ready"
	case vsc.Status == nil || vsc.Status.ReadyToUse == nil || !*vsc.Status.ReadyToUse:
		return false, "content not ready"
	}
	return true, ""
}

// cutNotReady: the backend answered with a handle, not ready yet.
func (s *state) cutNotReady(name string) (bool, string) {
	vsc := s.content(name)
	switch {
	case vsc == nil || vsc.Status == nil || vsc.Status.SnapshotHandle == nil:
		return false, "no handle yet"
	case vsc.Status.ReadyToUse != nil && *vsc.Status.ReadyToUse:
		return false, "already ready"
	}
	return true, ""
}

// noHandle: the content exists, CreateSnapshot has not answered.
func (s *state) noHandle(name string) (bool, string) {
	vsc := s.content(name)
	switch {
	case vsc == nil:
		return false, "no content yet"
	case vsc.Status != nil && vsc.Status.SnapshotHandle != nil:
		return false, "has a handle: " + *vsc.Status.SnapshotHandle
	}
	return true, ""
}

// changedSince lists the objects of before whose resourceVersion changed
// or that are gone now: each was written.
func (s *state) changedSince(before *state) []string {
	var out []string
	for k, rv := range before.rv {
		if now, ok := s.rv[k]; !ok {
			out = append(out, k+" (deleted)")
		} else if now != rv {
			out = append(out, fmt.Sprintf("%s (resourceVersion %s -> %s)", k, rv, now))
		}
	}
	sort.Strings(out)
	return out
}

// waitFor waits until cond holds for every snapshot of names.
func (c *cluster) waitFor(t *testing.T, names []string, timeout time.Duration, what string, cond func(*state, string) (bool, string)) *state {
	t.Helper()
	var s *state
	framework.Eventually(t, timeout, what, func() (bool, error) {
		s = c.read(t)
		for _, n := range names {
			if ok, why := cond(s, n); !ok {
				return false, fmt.Errorf("%s: %s", n, why)
			}
		}
		return true, nil
	})
	return s
}

// csiName is the name the CSI side gives the backend snapshot of a
// VolumeSnapshot: the driver chart's --snapshot-name-prefix=snapshot and
// the snapshot's UID.
func csiName(vs *snapv1.VolumeSnapshot) string { return "snapshot-" + string(vs.UID) }

// backendByName counts the driver's snapshots by the name they were cut
// with; a name held twice is a duplicate cut.
func (c *cluster) backendByName(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, b := range framework.Must(t, c.drv.GetCreated) {
		out[b.Name]++
	}
	return out
}

// recutsSince lists the CreateSnapshot and CreateVolumeGroupSnapshot calls
// after seq whose name is one of done (the backend names of snapshots and
// groups that were ready before).
func (c *cluster) recutsSince(t *testing.T, seq int64, done map[string]bool) (recuts []string, creates map[string]int) {
	t.Helper()
	creates = map[string]int{}
	log := c.drv.CallLog(t, seq)
	if len(log.Entries) > 0 && log.Entries[0].Seq != seq+1 {
		t.Fatalf("the driver's call log dropped calls after %d (first kept: %d): the re-cut check would miss some", seq, log.Entries[0].Seq)
	}
	for _, e := range log.Entries {
		if e.Method != "CreateSnapshot" && e.Method != "CreateVolumeGroupSnapshot" {
			continue
		}
		creates[e.Name]++
		if done[e.Name] || done[strings.SplitN(e.Name, ":", 2)[0]] {
			recuts = append(recuts, fmt.Sprintf("%s %s (%s)", e.Method, e.Name, e.Code))
		}
	}
	return recuts, creates
}
