package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

// schedNow is 10:30 UTC, 11:30 in Europe/Berlin.
var schedNow = time.Date(2026, 1, 2, 10, 30, 0, 0, time.UTC)

// useClock sets the dry run's clock for one test.
func useClock(t *testing.T, now time.Time) {
	prev := timeNow
	timeNow = func() time.Time { return now }
	t.Cleanup(func() { timeNow = prev })
}

// shopSnapshot is a ready snapshot the schedule db cut of claim at the
// hour hoursAgo hours before schedNow's.
func shopSnapshot(claim string, hoursAgo int) snapv1.VolumeSnapshot {
	at := schedNow.Truncate(time.Hour).Add(-time.Duration(hoursAgo) * time.Hour)
	return snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: schedule.SnapshotName("db", claim, at), Namespace: "shop",
		Labels: schedule.Labels(nil, "db", claim), Annotations: schedule.Annotations(nil, at)},
		Spec:   snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim)}},
		Status: &snapv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}}
}

// shopAPI serves the namespace shop: the schedule db (hourly in
// Europe/Berlin, keepLast 2) with three snapshots of claim data, the oldest
// of which a new claim restores from, and the group schedule together,
// whose group snapshots this cluster does not serve.
func shopAPI() *clusterAPI {
	db := v1alpha1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"},
		Spec: v1alpha1.SnapshotScheduleSpec{Schedule: "0 * * * *", TimeZone: ptr.To("Europe/Berlin"),
			Retention: v1alpha1.RetentionPolicy{KeepLast: ptr.To(int32(1))}}}
	together := *db.DeepCopy()
	together.Name, together.Spec.GroupSnapshot = "together", &v1alpha1.GroupSnapshotTemplate{}
	restore := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: "shop"},
		Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName),
			Kind: "VolumeSnapshot", Name: shopSnapshot("data", 2).Name}}}
	return &clusterAPI{lists: map[string][]any{
		"/apis/snapkeeper.io/v1alpha1/namespaces/shop/snapshotschedules": {together, db},
		"/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots": {shopSnapshot("data", 0), shopSnapshot("data", 1), shopSnapshot("data", 2),
			snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: "shop"}}},
		"/api/v1/namespaces/shop/persistentvolumeclaims": {restore},
	}}
}

func TestSchedulesDryRun(t *testing.T) {
	useClock(t, schedNow)
	api := shopAPI()
	kubeconfig := serve(t, api, "shop")
	var out, errOut bytes.Buffer
	code := run("snapctl", []string{"schedules", "--kubeconfig", kubeconfig, "--runs", "2"}, &out, &errOut)
	if code != 0 || errOut.String() != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	want := `SnapshotSchedule shop/db: "0 * * * *" in Europe/Berlin, retention keepLast: 1
  next: 2026-01-02 12:00 CET (2026-01-02 11:00 UTC)
  next: 2026-01-02 13:00 CET (2026-01-02 12:00 UTC)
  claim data: keeps 2, would delete 1
    keep    db-data-202601021000  2026-01-02 11:00 CET  ready  newest ready, keepLast 1/1
    keep    db-data-202601020800  2026-01-02 09:00 CET  ready  restoring a claim
    delete  db-data-202601020900  2026-01-02 10:00 CET  ready  beyond retention
SnapshotSchedule shop/together: "0 * * * *" in Europe/Berlin, group snapshots, retention keepLast: 1
  group snapshots are not served by this cluster (no VolumeGroupSnapshot CRD): nothing is cut or deleted; install the group snapshot CRDs
2 schedules (0 invalid), 2 snapshots kept, 1 would be deleted now (dry run: nothing was deleted)
`
	if out.String() != want {
		t.Errorf("output\n%s\nwant\n%s", out.String(), want)
	}
	// Only scheduled snapshots are read, of the context's namespace;
	// nothing is written.
	wantGets := []string{
		"/apis/snapkeeper.io/v1alpha1/namespaces/shop/snapshotschedules?",
		"/apis/snapshot.storage.k8s.io/v1/namespaces/shop/volumesnapshots?labelSelector=" + strings.ReplaceAll(schedule.LabelSchedule, "/", "%2F"),
		"/api/v1/namespaces/shop/persistentvolumeclaims?",
		"/apis/groupsnapshot.storage.k8s.io/v1/namespaces/shop/volumegroupsnapshots?labelSelector=" + strings.ReplaceAll(schedule.LabelSchedule, "/", "%2F"),
	}
	if !slices.Equal(api.gets, wantGets) || len(api.patches) > 0 {
		t.Errorf("requests %q, patches %q", api.gets, api.patches)
	}
}

func TestSchedulesJSONNameAndErrors(t *testing.T) {
	useClock(t, schedNow)
	kubeconfig := serve(t, shopAPI(), "default")
	var out, errOut bytes.Buffer
	if code := run("snapctl", []string{"schedules", "db", "-n", "shop", "-o", "json", "--kubeconfig", kubeconfig}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	var doc struct {
		Schedules []struct {
			Name   string
			Next   []struct{ Local, UTC time.Time }
			Series []struct {
				Name         string
				Keep, Delete []struct{ Name, State string }
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Schedules) != 1 || doc.Schedules[0].Name != "db" ||
		len(doc.Schedules[0].Next) != 3 || len(doc.Schedules[0].Series) != 1 || len(doc.Schedules[0].Series[0].Delete) != 1 {
		t.Fatalf("json %v: %s", err, out.String())
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"schedules", "nope", "-n", "shop"}, 1, "snapctl schedules: SnapshotSchedule shop/nope not found"},
		{[]string{"schedules", "-n", "empty"}, 2, "the cluster does not serve SnapshotSchedules"},
		{[]string{"schedules", "-A", "-n", "shop"}, 2, "-n and -A exclude each other"},
		{[]string{"schedules", "-A", "db"}, 2, "give -n, not -A"},
		{[]string{"schedules", "--runs", "-1"}, 2, "--runs must be at least 0"},
		{[]string{"schedules", "-o", "yaml"}, 2, "-o must be text or json"},
	} {
		out.Reset()
		errOut.Reset()
		code := run("snapctl", append(c.args, "--kubeconfig", kubeconfig), &out, &errOut)
		if code != c.code || !strings.Contains(errOut.String(), c.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", c.args, code, errOut.String(), c.code, c.says)
		}
	}
}

func TestSchedulesInvalidSpecExitsOne(t *testing.T) {
	useClock(t, schedNow)
	bad := v1alpha1.SnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "shop"},
		Spec: v1alpha1.SnapshotScheduleSpec{Schedule: "@every 1h", Retention: v1alpha1.RetentionPolicy{KeepLast: ptr.To(int32(1))}}}
	api := &clusterAPI{lists: map[string][]any{
		"/apis/snapkeeper.io/v1alpha1/snapshotschedules":   {bad},
		"/apis/snapshot.storage.k8s.io/v1/volumesnapshots": {},
		"/api/v1/persistentvolumeclaims":                   {},
	}}
	var out, errOut bytes.Buffer
	code := run("kubectl snapkeeper", []string{"schedules", "-A", "--kubeconfig", serve(t, api, "shop")}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "invalid spec: invalid schedule: \"@every 1h\"") {
		t.Errorf("exit %d, output %q, stderr %q", code, out.String(), errOut.String())
	}
}
