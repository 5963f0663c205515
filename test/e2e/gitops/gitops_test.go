package gitops

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// world is the suite's plane: a mock driver with a csi-provisioner, our
// binder and CSI side, the webhook registered with the failure policies the
// chart ships, Flux, and the application's repository.
type world struct {
	*framework.Scenario
	wh   *framework.Webhook
	repo *repo
	flux *flux
	k    *kustomization
	// vars fill the manifests' templates.
	vars map[string]string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "gitops", NoClass: true})
	w := &world{Scenario: s, vars: map[string]string{"NS": s.NS, "Driver": s.Drv.Name, "SC": "sc-" + s.NS}}
	w.startWebhook(t)
	w.flux = startFlux(t, s.Env)
	w.repo = newRepo(t, s.Env.TempDir(t, "git"))
	return w
}

// judging are the options of the webhook, and of snapctl in the CI step
// (the same rules need the same options): data sources of unknown kinds
// judged strictly (the chart's webhook.strictPopulators), since a GitOps
// repository wants a mistyped kind rejected, not a claim that stays
// Pending.
var judging = []string{"--strict-populators"}

// startWebhook starts our webhook with the judging options and gives each
// registered rule the chart's failure policy.
func (w *world) startWebhook(t *testing.T) {
	t.Helper()
	w.wh = w.Env.StartWebhook(t, judging...)
	chartPolicies(t, w.Env)
}

// files renders the repository's files from the named manifests.
func (w *world) files(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range names {
		tpl, err := template.New(name).Parse(manifests[name])
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := tpl.Execute(&b, w.vars); err != nil {
			t.Fatal(err)
		}
		out[name+".yaml"] = b.String()
	}
	return out
}

// push commits the named manifests as the whole repository.
func (w *world) push(t *testing.T, message string, names ...string) (string, time.Time) {
	t.Helper()
	start := time.Now()
	return w.repo.commit(t, message, w.files(t, names...)), start
}

// manifests are the repository's files; classes are cluster-scoped, so
// their names carry the namespace.
var manifests = map[string]string{
	"classes": `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: {{.NS}}-default
  annotations:
    snapshot.storage.kubernetes.io/is-default-class: "true"
driver: {{.Driver}}
deletionPolicy: Delete
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: {{.NS}}-retain
driver: {{.Driver}}
deletionPolicy: Retain
`,
	"second-default": `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: {{.NS}}-second
  annotations:
    snapshot.storage.kubernetes.io/is-default-class: "true"
driver: {{.Driver}}
deletionPolicy: Delete
`,
	"claims": `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: db
  namespace: {{.NS}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {{.SC}}
  resources:
    requests:
      storage: 64Mi
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: logs
  namespace: {{.NS}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {{.SC}}
  resources:
    requests:
      storage: 64Mi
`,
	"snapshots": `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: db-snap
  namespace: {{.NS}}
spec:
  source:
    persistentVolumeClaimName: db
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: logs-snap
  namespace: {{.NS}}
spec:
  volumeSnapshotClassName: {{.NS}}-retain
  source:
    persistentVolumeClaimName: logs
`,
	// extra is a valid new snapshot riding along with each mistake: it
	// shows whether Flux applied part of a commit it reported failed.
	"extra": `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: extra
  namespace: {{.NS}}
spec:
  source:
    persistentVolumeClaimName: logs
`,
	"restore": `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: db-restore
  namespace: {{.NS}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {{.SC}}
  dataSource:
    apiGroup: snapshot.storage.k8s.io
    kind: VolumeSnapshot
    name: db-snap
  resources:
    requests:
      storage: 64Mi
`,
	"late": `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: late
  namespace: {{.NS}}
spec:
  source:
    persistentVolumeClaimName: db
`,
}

func init() {
	// The mistakes and the forced change are each one edit of a good file.
	edits := []struct{ name, from, old, new string }{
		// db-snap's source changed to logs.
		{"snapshots-moved", "snapshots", "persistentVolumeClaimName: db\n", "persistentVolumeClaimName: logs\n"},
		// a restore from a kind in the wrong case.
		{"restore-wrong-kind", "restore", "kind: VolumeSnapshot\n", "kind: volumesnapshot\n"},
		// late from logs, with Flux's force annotation: Flux replaces an
		// object whose change the API server calls immutable.
		{"late-forced", "late", "  namespace: {{.NS}}\nspec:\n  source:\n    persistentVolumeClaimName: db\n",
			"  namespace: {{.NS}}\n  annotations:\n    kustomize.toolkit.fluxcd.io/force: enabled\nspec:\n  source:\n    persistentVolumeClaimName: logs\n"},
	}
	for _, e := range edits {
		if !strings.Contains(manifests[e.from], e.old) {
			panic("manifest " + e.from + " lacks " + e.old)
		}
		manifests[e.name] = strings.Replace(manifests[e.from], e.old, e.new, 1)
	}
}

// base is the repository of scenario 1.
var base = []string{"classes", "claims", "snapshots"}

// TestFluxRepository runs the scenarios in order on one repository, as a
// team's history would: each step starts from the state the one before
// left, and the suite's invariants (no leak, nothing stuck) close it.
func TestFluxRepository(t *testing.T) {
	w := newWorld(t)
	// Before the first commit the source fails and retries every 2 s, as
	// a new repository's would.
	w.k = w.flux.sync(t, "app", w.repo.URL)
	steps := []struct {
		name string
		run  func(w *world, t *testing.T)
	}{
		{"1-reconciled", (*world).reconciled},
		{"2-rejected", (*world).rejected},
		{"3-fixed", (*world).fixed},
		{"4-pruned", (*world).pruned},
		{"5-webhook-down", (*world).webhookDown},
		{"force-replaces", (*world).forced},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(w, t) }) {
			t.FailNow()
		}
	}
	w.invariants(t)
}

// 1: a repository with a default class, claims and snapshots.
func (w *world) reconciled(t *testing.T) {
	sha, start := w.push(t, "classes, claims and snapshots", base...)
	o, took := w.k.wait(t, sha, "True", start, 3*time.Minute)
	t.Logf("commit %s: %v after %v", sha[:8], o, took.Round(100*time.Millisecond))
	for _, name := range []string{"db-snap", "logs-snap"} {
		w.WaitReady(t, name, 2*time.Minute)
	}
	t.Logf("commit %s: snapshots ready %v after the push", sha[:8], time.Since(start).Round(100*time.Millisecond))
	vs := w.GetSnapshot(t, "db-snap")
	if vs.Spec.VolumeSnapshotClassName == nil || *vs.Spec.VolumeSnapshotClassName != w.NS+"-default" {
		t.Errorf("db-snap class = %v, want the repository's default %s-default", vs.Spec.VolumeSnapshotClassName, w.NS)
	}
}

// mistake is one bad change of scenario 2 and what the Kustomization must
// say about it.
type mistake struct {
	name string
	// files are the commit's manifests: the base's, the mistake, and extra.
	files []string
	// want are the parts of the Ready message: object, field, rule, fix.
	want []string
}

func (w *world) mistakes() []mistake {
	ns := w.NS
	return []mistake{
		{"second-default-class", append(base[:len(base):len(base)], "second-default", "extra"), []string{
			"VolumeSnapshotClass/" + ns + "-second dry-run failed",
			`admission webhook "volumesnapshotclasses.validation.snapkeeper.io" denied the request`,
			"metadata.annotations[snapshot.storage.kubernetes.io/is-default-class]",
			ns + "-default",
		}},
		{"source-changed", []string{"classes", "claims", "snapshots-moved", "extra"}, []string{
			"VolumeSnapshot/" + ns + "/db-snap dry-run failed",
			"spec.source.persistentVolumeClaimName",
			"persistentVolumeClaimName is immutable",
		}},
		{"restore-kind-wrong", append(base[:len(base):len(base)], "restore-wrong-kind", "extra"), []string{
			"PersistentVolumeClaim/" + ns + "/db-restore dry-run failed",
			`admission webhook "persistentvolumeclaims.validation.snapkeeper.io" denied the request`,
			"spec.dataSource.kind",
			`did you mean "VolumeSnapshot"?`,
		}},
	}
}

// 2: each mistake in a commit of its own, then all three in one commit.
// Flux reports the first failure of a stage (classes before everything
// else), so one message at a time: the combined commit shows the class's,
// the fixing commits of scenario 3 would show the next.
func (w *world) rejected(t *testing.T) {
	before := w.Content(t, *w.GetSnapshot(t, "db-snap").Status.BoundVolumeSnapshotContentName)
	all := mistake{name: "all-three", files: []string{"classes", "second-default", "claims", "snapshots-moved", "restore-wrong-kind", "extra"}}
	for _, m := range append(w.mistakes(), all) {
		t.Run(m.name, func(t *testing.T) {
			if m.name == "all-three" {
				m.want = w.mistakes()[0].want
			}
			sha, start := w.push(t, "bad: "+m.name, m.files...)
			o, took := w.k.wait(t, sha, "False", start, 2*time.Minute, m.want...)
			t.Logf("commit %s (%s): Ready=False after %v\n  reason: %s\n  message: %s", sha[:8], m.name, took.Round(100*time.Millisecond), o.Reason, o.Message)
			if m.name == "all-three" {
				w.agrees(t, o)
			}
			w.nothingApplied(t, before)
		})
	}
}

// nothingApplied checks that the failed commit left the cluster as the
// last good one: no second default class, no extra snapshot, no restore
// claim, db-snap still of db, ready and bound to the same content.
func (w *world) nothingApplied(t *testing.T, before *snapv1.VolumeSnapshotContent) {
	t.Helper()
	w.absent(t, "extra")
	if _, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Get(context.Background(), "db-restore", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim db-restore: %v, want it not applied", err)
	}
	vs := w.GetSnapshot(t, "db-snap")
	if vs.Spec.Source.PersistentVolumeClaimName == nil || *vs.Spec.Source.PersistentVolumeClaimName != "db" ||
		vs.Status == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse ||
		vs.Status.BoundVolumeSnapshotContentName == nil || *vs.Status.BoundVolumeSnapshotContentName != before.Name {
		t.Errorf("db-snap changed by a failed commit: %s", framework.JSON(vs))
	}
}

// 3: the fixing commit: the extra snapshot and a correct restore claim.
func (w *world) fixed(t *testing.T) {
	sha, start := w.push(t, "fix: one default class, db-snap of db, restore from VolumeSnapshot", "classes", "claims", "snapshots", "restore", "extra")
	o, took := w.k.wait(t, sha, "True", start, 2*time.Minute)
	t.Logf("commit %s: %v after %v", sha[:8], o, took.Round(100*time.Millisecond))
	w.WaitReady(t, "extra", 2*time.Minute)
	framework.Eventually(t, 2*time.Minute, "db-restore bound", func() (bool, error) {
		c, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).Get(context.Background(), "db-restore", metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
	t.Logf("commit %s: extra ready and db-restore bound %v after the push", sha[:8], time.Since(start).Round(100*time.Millisecond))
	classes, err := w.Env.Snap.SnapshotV1().VolumeSnapshotClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, c := range classes.Items {
		if c.Driver == w.Drv.Name {
			mine = append(mine, fmt.Sprintf("%s(default=%s)", c.Name, c.Annotations["snapshot.storage.kubernetes.io/is-default-class"]))
		}
	}
	sort.Strings(mine)
	if want := fmt.Sprintf("[%[1]s-default(default=true) %[1]s-retain(default=)]", w.NS); fmt.Sprint(mine) != want {
		t.Errorf("classes of the driver = %v, want %s", mine, want)
	}
	if src := w.GetSnapshot(t, "db-snap").Spec.Source.PersistentVolumeClaimName; *src != "db" {
		t.Errorf("db-snap source = %s, want db", *src)
	}
}

// 4: snapshots removed from the repository with prune on: Flux deletes
// them; Delete contents and their backend snapshots go, the Retain
// content and its backend snapshot stay.
func (w *world) pruned(t *testing.T) {
	contents := map[string]*snapv1.VolumeSnapshotContent{}
	for _, name := range []string{"db-snap", "logs-snap", "extra"} {
		contents[name] = w.Content(t, *w.GetSnapshot(t, name).Status.BoundVolumeSnapshotContentName)
	}
	sha, start := w.push(t, "prune: snapshots removed", "classes", "claims", "restore")
	o, took := w.k.wait(t, sha, "True", start, 2*time.Minute)
	t.Logf("commit %s: %v after %v", sha[:8], o, took.Round(100*time.Millisecond))
	for name := range contents {
		w.WaitSnapshotGone(t, name)
	}
	w.WaitContentGone(t, contents["db-snap"].Name)
	w.WaitContentGone(t, contents["extra"].Name)
	t.Logf("commit %s: snapshots and Delete contents gone %v after the push", sha[:8], time.Since(start).Round(100*time.Millisecond))
	kept := w.Content(t, contents["logs-snap"].Name)
	backend := w.WaitBackend(t, 1, time.Minute)
	if kept.Status == nil || kept.Status.SnapshotHandle == nil || backend[0].ID != *kept.Status.SnapshotHandle {
		t.Errorf("backend %+v, want only the Retain content's snapshot %s", backend, framework.JSON(kept.Status))
	}
	// The Retain content is the team's to delete: as Delete, the backend
	// snapshot goes with it.
	patch := []byte(`{"spec":{"deletionPolicy":"Delete"}}`)
	if _, err := w.Env.Snap.SnapshotV1().VolumeSnapshotContents().Patch(context.Background(), kept.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.DeleteContent(t, kept.Name)
	w.WaitContentGone(t, kept.Name)
	w.WaitBackend(t, 0, time.Minute)
}

// 5: the webhook down with the chart's failure policies: the snapshot
// kinds fail closed, so Flux reports the call that failed and applies
// nothing of the commit; with the webhook back, the commit's bad class is
// denied by the webhook, and the fixing commit reconciles.
func (w *world) webhookDown(t *testing.T) {
	w.wh.Proc.Stop(5 * time.Second)
	sha, start := w.push(t, "while the webhook is down: a late snapshot and a second default class", "classes", "second-default", "claims", "restore", "late")
	// Flux dry-runs every object of a stage, changed or not: any class of
	// the repository may be the one whose failed call it reports.
	o, took := w.k.wait(t, sha, "False", start, 2*time.Minute,
		"VolumeSnapshotClass/"+w.NS+"-", "dry-run failed", `failed calling webhook "volumesnapshotclasses.validation.snapkeeper.io"`)
	t.Logf("commit %s, webhook down: Ready=False after %v\n  reason: %s\n  message: %s", sha[:8], took.Round(100*time.Millisecond), o.Reason, o.Message)
	w.absent(t, "late")

	back := time.Now()
	w.startWebhook(t)
	o, took = w.k.wait(t, sha, "False", back, 2*time.Minute, w.mistakes()[0].want...)
	t.Logf("commit %s, webhook back: the webhook's denial after %v\n  message: %s", sha[:8], took.Round(100*time.Millisecond), o.Message)
	w.absent(t, "late")

	sha, start = w.push(t, "fix: no second default class", "classes", "claims", "restore", "late")
	o, took = w.k.wait(t, sha, "True", start, 2*time.Minute)
	t.Logf("commit %s: %v after %v", sha[:8], o, took.Round(100*time.Millisecond))
	w.WaitReady(t, "late", 2*time.Minute)
}

// forced: with Flux's force annotation a changed source is not rejected
// but replaced: Flux deletes the snapshot (and, under a Delete class, our
// controllers delete its content and backend snapshot) and creates it anew
// from the new source. docs/gitops.md warns about it.
func (w *world) forced(t *testing.T) {
	old := w.GetSnapshot(t, "late")
	oldContent := w.Content(t, *old.Status.BoundVolumeSnapshotContentName)
	sha, start := w.push(t, "late from logs, forced", "classes", "claims", "restore", "late-forced")
	o, took := w.k.wait(t, sha, "True", start, 2*time.Minute)
	t.Logf("commit %s: %v after %v", sha[:8], o, took.Round(100*time.Millisecond))
	w.WaitContentGone(t, oldContent.Name)
	vs := w.WaitReady(t, "late", 2*time.Minute)
	if vs.UID == old.UID || *vs.Spec.Source.PersistentVolumeClaimName != "logs" {
		t.Errorf("late not replaced: uid %s (was %s), source %s", vs.UID, old.UID, *vs.Spec.Source.PersistentVolumeClaimName)
	}
	backend := w.WaitBackend(t, 1, time.Minute)
	if backend[0].ID == *oldContent.Status.SnapshotHandle {
		t.Errorf("the replaced snapshot's backend snapshot %s is still there", backend[0].ID)
	}
	t.Logf("commit %s: late replaced (old content and backend snapshot %s deleted), new one ready %v after the push",
		sha[:8], *oldContent.Status.SnapshotHandle, time.Since(start).Round(100*time.Millisecond))
}

// absent checks that no second default class and no snapshot name exist.
func (w *world) absent(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := w.Env.Snap.SnapshotV1().VolumeSnapshotClasses().Get(ctx, w.NS+"-second", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("class %s-second: %v, want it not applied", w.NS, err)
	}
	if _, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("snapshot %s: %v, want it not applied", name, err)
	}
}

// invariants: the repository emptied with prune on removes everything;
// then no snapshot object is stuck and the driver holds exactly what the
// contents say (nothing).
func (w *world) invariants(t *testing.T) {
	sha, start := w.push(t, "empty")
	w.k.wait(t, sha, "True", start, 2*time.Minute)
	ctx := context.Background()
	framework.Eventually(t, 2*time.Minute, "the namespace's snapshots and claims gone", func() (bool, error) {
		vs, err := w.Env.Snap.SnapshotV1().VolumeSnapshots(w.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pvcs, err := w.Env.Kube.CoreV1().PersistentVolumeClaims(w.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(vs.Items)+len(pvcs.Items) == 0, fmt.Errorf("%d snapshots, %d claims left", len(vs.Items), len(pvcs.Items))
	})
	w.BackendMatchesContents(t)
	w.WaitBackend(t, 0, time.Minute)
}
