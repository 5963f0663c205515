package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// csiMode says how a scenario's CSI side runs.
type csiMode int

const (
	csiRunning csiMode = iota // started before the first step
	csiLater                  // started by a step (run.startCSI)
	csiNone                   // never: no CSI side for the driver
	csiNodes                  // one per node in scenario.Nodes, --node-deployment
)

// scenario is one entry of the catalogue. It runs unchanged against every
// pairing; its steps act on the API or the driver, then wait (until) and
// settle, and the run records what every step left.
type scenario struct {
	Name  string // also the namespace and the driver name's first label
	Title string // one line for docs/compatibility.md
	Short bool   // part of the short catalogue (plain `go test`)
	// Policy of the class "class-<name>" the run creates (unless NoClass);
	// default Delete.
	Policy      snapv1.DeletionPolicy
	NoClass     bool
	ClassParams map[string]string
	// Faults are the driver's initial faults, on top of defaultFaults
	// (a reported size) unless NoSize.
	Faults     []framework.FaultRule
	NoSize     bool
	BinderArgs []string // flags of the binder (scenarios are grouped by them)
	CSIArgs    []string // flags of the CSI side
	CSI        csiMode
	Nodes      []string // csiNodes: node names (Node objects are the scenario's job)
	// GroupClass: the run also creates the driver's default
	// VolumeGroupSnapshotClass "groupclass-<name>" with Policy.
	GroupClass bool
	// VolumeSizes are the driver's snapshot sizes in bytes by claim name
	// (of volume "vol-<claim>"); they win over the default size.
	VolumeSizes map[string]int64
	Steps       []step
	// Terminating lists objects ("VolumeSnapshotContent/<name>") that the
	// scenario expects to stay Terminating: what the community leaves
	// stuck by design. Any other Terminating object at the end fails.
	Terminating []string
	// CommunityCSIStuck lists objects that the community csi-snapshotter
	// may leave Terminating through a race of its own (a bug, not by
	// design): allowed only in pairings where it is the CSI side; our CSI
	// side must always finish.
	CommunityCSIStuck []string
}

// step is one action and what to wait for.
type step struct {
	Name string
	Do   func(ctx context.Context, r *run) error
	// Until, when set, is waited for (up to Timeout, default 60s) after Do;
	// whether it was met is part of the outcome.
	Until   func(r *run, o *obs) bool
	Timeout time.Duration
	// Quiet is how long nothing may change before the step counts as
	// settled (default 3s).
	Quiet time.Duration
}

// snapshotSize is what the mock reports for every snapshot unless the
// scenario says NoSize (the e2e mock itself says 0, "unknown").
const snapshotSize = 1 << 30

func defaultFaults() []framework.FaultRule {
	return []framework.FaultRule{{Method: "*", SizeBytes: snapshotSize}}
}

// result is one scenario's run against one pairing.
type result struct {
	out      outcome
	err      error    // the run itself failed (a test bug or a dead process)
	leaks    []string // backend snapshots no content points at
	stuck    []string // Terminating objects the scenario does not expect
	dir      string   // logs
	duration time.Duration
}

// run is one scenario against one pairing.
type run struct {
	w   *world
	sc  *scenario
	ns  string
	dir string
	drv *framework.CSIDriver
	csi []*proc

	step  int
	calls []stepCall
	// lastSeq is the driver call log position read so far.
	lastSeq int64
	// uids maps UIDs to placeholders; ids maps snapshot ids to CSI names.
	uids map[string]string
	ids  map[string]string
	// handlePolicy is the deletion policy of the last content (or group
	// content) seen holding each snapshot (group snapshot) id: an orphan of
	// a Retain content is retention, not a leak.
	handlePolicy map[string]snapv1.DeletionPolicy
	seenContents map[string]bool
	// seenGroupContents are the group contents seen (for their events).
	seenGroupContents map[string]bool
	everSeen          map[string]map[string]bool
	// volumes maps the volume handles of the run's claims to the claims;
	// hashes maps the hashes in group member names to placeholders.
	volumes map[string]string
	hashes  map[string]string

	mu      sync.Mutex
	pvs     []string
	classes []string
	nodes   []string
	logs    []string
}

func (r *run) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (r *run) driverName() string { return r.sc.Name + ".conformance.csi" }
func (r *run) className() string  { return "class-" + r.sc.Name }

// runScenario runs sc on w and returns its normalized outcome.
func runScenario(ctx context.Context, w *world, sc *scenario, dir string) *result {
	start := time.Now()
	r := &run{w: w, sc: sc, ns: sc.Name, dir: dir, uids: map[string]string{}, ids: map[string]string{},
		handlePolicy: map[string]snapv1.DeletionPolicy{}, seenContents: map[string]bool{}, everSeen: map[string]map[string]bool{},
		seenGroupContents: map[string]bool{}, volumes: map[string]string{}, hashes: map[string]string{}}
	res := &result{out: outcome{}, dir: dir}
	defer func() {
		res.duration = time.Since(start)
		_ = os.WriteFile(filepath.Join(dir, "run.log"), []byte(strings.Join(r.logs, "\n")+"\n"), 0o644)
	}()
	res.err = r.execute(ctx, res)
	r.cleanup()
	return res
}

func (r *run) execute(ctx context.Context, res *result) error {
	env := r.w.env
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	faults := append([]framework.FaultRule{}, r.sc.Faults...)
	if !r.sc.NoSize {
		faults = append(faults, defaultFaults()...)
	}
	// A group scenario's driver starts without faults: it first skips
	// group ids (skipGroupIDs), then gets them.
	initial := faults
	if r.sc.GroupClass {
		initial = nil
	}
	drv, err := framework.StartCSIDriver(r.dir, framework.CSIDriverOptions{DriverName: r.driverName(), Faults: &framework.Faults{Rules: initial}, Args: r.driverArgs()})
	if err != nil {
		return err
	}
	r.drv = drv
	if !r.sc.NoClass {
		if err := r.class(ctx, r.className(), r.sc.Policy, r.sc.ClassParams, false); err != nil {
			return err
		}
	}
	if r.sc.GroupClass {
		if err := r.skipGroupIDs(ctx); err != nil {
			return err
		}
		if _, err := drv.PutFaults(ctx, framework.Faults{Rules: faults}); err != nil {
			return err
		}
		if err := r.groupClass(ctx, r.groupClassName(), r.sc.Policy); err != nil {
			return err
		}
	}
	switch r.sc.CSI {
	case csiRunning:
		if err := r.startCSI(ctx); err != nil {
			return err
		}
	case csiNodes:
		for _, n := range r.sc.Nodes {
			if err := r.startCSIOn(n); err != nil {
				return err
			}
		}
	}
	// The start-up calls (probe, capabilities) belong to no step.
	if err := r.pollCalls(ctx); err != nil {
		return err
	}
	var last *obs
	for i, st := range r.sc.Steps {
		r.step = i + 1
		r.logf("step %d %s", r.step, st.Name)
		if err := st.Do(ctx, r); err != nil {
			return fmt.Errorf("step %d %s: %w", r.step, st.Name, err)
		}
		if st.Until != nil {
			timeout := st.Timeout
			if timeout == 0 {
				timeout = 60 * time.Second
			}
			met, err := r.waitUntil(ctx, timeout, st.Until)
			if err != nil {
				return err
			}
			v := "met"
			if !met {
				v = "timeout"
			}
			res.out.set(fmt.Sprintf("s%d:%s.until", r.step, st.Name), v)
			r.logf("until: %s", v)
		}
		quiet := st.Quiet
		if quiet == 0 {
			quiet = 3 * time.Second
		}
		if last, err = r.settle(ctx, quiet); err != nil {
			return err
		}
		r.stepSummary(last, r.step, st.Name, res.out)
		if err := r.procsAlive(); err != nil {
			return err
		}
	}
	r.step = len(r.sc.Steps) + 1
	if last == nil {
		if last, err = r.observe(ctx); err != nil {
			return err
		}
	}
	r.final(last, res.out)
	res.leaks = r.leaks(last)
	res.stuck = r.stuck(last)
	return nil
}

func (r *run) procsAlive() error {
	for _, p := range r.csi {
		if p.p.Exited() {
			return fmt.Errorf("%s exited:\n%s", p.name, p.p.Tail(2000))
		}
	}
	return nil
}

// waitUntil observes until cond holds or timeout passes.
func (r *run) waitUntil(ctx context.Context, timeout time.Duration, cond func(*run, *obs) bool) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		o, err := r.observe(ctx)
		if err != nil {
			return false, err
		}
		if cond(r, o) {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settle observes until nothing changed for quiet (at most 60s).
func (r *run) settle(ctx context.Context, quiet time.Duration) (*obs, error) {
	start := time.Now()
	var lastFP string
	since := time.Now()
	for {
		o, err := r.observe(ctx)
		if err != nil {
			return nil, err
		}
		fp := r.fingerprint(o)
		if fp != lastFP {
			lastFP, since = fp, time.Now()
		}
		if time.Since(since) >= quiet {
			return o, nil
		}
		if time.Since(start) > 60*time.Second {
			r.logf("step %d never settled; last state:\n%s", r.step, fp)
			return o, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// leaks lists backend snapshots that no content points at and backend
// group snapshots that no group content points at, except those a Retain
// content kept on purpose. A member of a group that a group content holds
// (or kept) is held with it: a pre-provisioned group has no member
// contents.
func (r *run) leaks(o *obs) []string {
	held := map[string]bool{}
	for _, c := range o.vsc {
		if h := contentHandle(c); h != "" {
			held[h] = true
		}
	}
	for _, c := range o.vgsc {
		if h := groupContentHandle(c); h != "" {
			held[h] = true
		}
	}
	kept := func(id string) bool { return held[id] || r.handlePolicy[id] == snapv1.VolumeSnapshotContentRetain }
	var out []string
	for _, b := range o.backend {
		if kept(b.ID) || (b.GroupSnapshotID != "" && kept(b.GroupSnapshotID)) {
			continue
		}
		out = append(out, fmt.Sprintf("backend snapshot %s (%s) has no content", r.handle(b.ID), r.norm(b.Name)))
	}
	for _, g := range o.groups {
		if kept(g.ID) {
			continue
		}
		out = append(out, fmt.Sprintf("backend group snapshot %s (%s) has no group content", r.handle(g.ID), r.norm(g.Name)))
	}
	return out
}

// stuck lists Terminating objects the scenario does not expect.
func (r *run) stuck(o *obs) []string {
	allowed := map[string]bool{}
	for _, s := range r.sc.Terminating {
		allowed[s] = true
	}
	if r.w.pairing.CSI == community {
		for _, s := range r.sc.CommunityCSIStuck {
			allowed[s] = true
		}
	}
	var out []string
	check := func(kind, name string, ts *metav1.Time, fin []string) {
		key := kind + "/" + name
		if ts != nil && !allowed[key] {
			out = append(out, fmt.Sprintf("%s Terminating with finalizers %v", key, fin))
		}
	}
	for n, v := range o.vs {
		check("VolumeSnapshot", r.normHash(n), v.DeletionTimestamp, v.Finalizers)
	}
	for n, g := range o.vgs {
		check("VolumeGroupSnapshot", n, g.DeletionTimestamp, g.Finalizers)
	}
	for n, c := range o.vgsc {
		check("VolumeGroupSnapshotContent", r.norm(n), c.DeletionTimestamp, c.Finalizers)
	}
	for n, c := range o.vsc {
		check("VolumeSnapshotContent", r.norm(n), c.DeletionTimestamp, c.Finalizers)
	}
	for n, c := range o.pvc {
		check("PersistentVolumeClaim", n, c.DeletionTimestamp, c.Finalizers)
	}
	sort.Strings(out)
	return out
}

// cleanup stops the run's processes and removes its objects (finalizers
// stripped), so that the next binder of this control plane never sees them.
func (r *run) cleanup() {
	for _, p := range r.csi {
		p.stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := r.w.env
	strip := []byte(`{"metadata":{"finalizers":null}}`)
	r.cleanupGroups(ctx, strip)
	if list, err := env.Snap.SnapshotV1().VolumeSnapshots(r.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, v := range list.Items {
			_, _ = env.Snap.SnapshotV1().VolumeSnapshots(r.ns).Patch(ctx, v.Name, types.MergePatchType, strip, metav1.PatchOptions{})
			_ = env.Snap.SnapshotV1().VolumeSnapshots(r.ns).Delete(ctx, v.Name, metav1.DeleteOptions{})
		}
	}
	if list, err := env.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if c.Spec.Driver != r.driverName() && c.Spec.VolumeSnapshotRef.Namespace != r.ns {
				continue
			}
			_, _ = env.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, c.Name, types.MergePatchType, strip, metav1.PatchOptions{})
			_ = env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
	if list, err := env.Kube.CoreV1().PersistentVolumeClaims(r.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			_, _ = env.Kube.CoreV1().PersistentVolumeClaims(r.ns).Patch(ctx, c.Name, types.MergePatchType, strip, metav1.PatchOptions{})
			_ = env.Kube.CoreV1().PersistentVolumeClaims(r.ns).Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
	for _, pv := range r.pvs {
		_ = env.Kube.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
	}
	for _, c := range r.classes {
		_ = env.Snap.SnapshotV1().VolumeSnapshotClasses().Delete(ctx, c, metav1.DeleteOptions{})
	}
	for _, n := range r.nodes {
		_ = env.Kube.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
	}
	if r.drv != nil {
		r.drv.Stop()
	}
}

// ---- actions for steps ----

// startCSI starts the scenario's CSI side (csiLater scenarios call it from
// a step).
func (r *run) startCSI(_ context.Context) error {
	p, err := startCSISide(r.w.env, r.dir, r.w.pairing.CSI, r.drv, "", r.sc.CSIArgs)
	if err != nil {
		return err
	}
	r.csi = append(r.csi, p)
	return nil
}

func (r *run) startCSIOn(node string) error {
	p, err := startCSISide(r.w.env, r.dir, r.w.pairing.CSI, r.drv, node, r.sc.CSIArgs)
	if err != nil {
		return err
	}
	r.csi = append(r.csi, p)
	return nil
}

func (r *run) class(ctx context.Context, name string, policy snapv1.DeletionPolicy, params map[string]string, isDefault bool) error {
	if policy == "" {
		policy = snapv1.VolumeSnapshotContentDelete
	}
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: r.driverName(), DeletionPolicy: policy, Parameters: params}
	if isDefault {
		c.Annotations = map[string]string{snapshot.AnnDefaultClass: "true"}
	}
	if _, err := r.w.env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("class %s: %w", name, err)
	}
	r.mu.Lock()
	r.classes = append(r.classes, name)
	r.mu.Unlock()
	return nil
}

func (r *run) secret(ctx context.Context, name string, keys ...string) error {
	data := map[string][]byte{}
	for _, k := range keys {
		data[k] = []byte("value-of-" + k)
	}
	_, err := r.w.env.Kube.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	return err
}

// pvc creates a bound claim "name" with volume handle "vol-<name>".
func (r *run) pvc(ctx context.Context, name string, o framework.PVCOptions) error {
	o.Driver = r.driverName()
	if o.VolumeHandle == "" {
		o.VolumeHandle = "vol-" + name
	}
	r.mu.Lock()
	r.volumes[o.VolumeHandle] = name
	r.mu.Unlock()
	pvc, err := r.w.env.BindPVC(ctx, r.ns, name, o)
	if err != nil {
		return err
	}
	r.learnUID(string(pvc.UID), "PersistentVolumeClaim/"+name)
	r.mu.Lock()
	r.pvs = append(r.pvs, "pv-"+r.ns+"-"+name)
	r.mu.Unlock()
	return nil
}

func claimSpec(mode corev1.PersistentVolumeMode) corev1.PersistentVolumeClaimSpec {
	empty := ""
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		StorageClassName: &empty,
		VolumeMode:       &mode,
	}
}

// pendingPVC creates an unbound claim (no provisioner runs: it stays
// Pending until bindPVC).
func (r *run) pendingPVC(ctx context.Context, name string) error {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns}, Spec: claimSpec(corev1.PersistentVolumeFilesystem)}
	out, err := r.w.env.Kube.CoreV1().PersistentVolumeClaims(r.ns).Create(ctx, c, metav1.CreateOptions{})
	if err == nil {
		r.learnUID(string(out.UID), "PersistentVolumeClaim/"+name)
	}
	return err
}

// bindPVC binds a Pending claim to a new CSI volume "vol-<name>", as the PV
// controller would.
func (r *run) bindPVC(ctx context.Context, name string) error {
	r.mu.Lock()
	r.pvs = append(r.pvs, "pv-"+r.ns+"-"+name) // cleanup ignores a PV never created
	r.mu.Unlock()
	_, err := r.w.env.BindPendingClaim(ctx, r.ns, name, framework.PVCOptions{Driver: r.driverName(), VolumeHandle: "vol-" + name})
	return err
}

// setClaimPhase writes a claim's status phase (and capacity when Bound).
func (r *run) setClaimPhase(ctx context.Context, name string, phase corev1.PersistentVolumeClaimPhase) error {
	kube := r.w.env.Kube.CoreV1()
	return retryConflict(func() error {
		c, err := kube.PersistentVolumeClaims(r.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Phase = phase
		if phase == corev1.ClaimBound {
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
			c.Status.AccessModes = c.Spec.AccessModes
		}
		_, err = kube.PersistentVolumeClaims(r.ns).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
}

func retryConflict(f func() error) error {
	var err error
	for i := 0; i < 10; i++ {
		if err = f(); err == nil || !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// restorePVC creates a Pending claim restoring from snapshot snap, through
// spec.dataSource or (ref) spec.dataSourceRef.
func (r *run) restorePVC(ctx context.Context, name, snap string, ref bool) error {
	group := snapshot.GroupName
	spec := claimSpec(corev1.PersistentVolumeFilesystem)
	if ref {
		spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: snap}
	} else {
		spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: snapshot.KindSnapshot, Name: snap}
	}
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns}, Spec: spec}
	out, err := r.w.env.Kube.CoreV1().PersistentVolumeClaims(r.ns).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.learnUID(string(out.UID), "PersistentVolumeClaim/"+name)
	return r.setClaimPhase(ctx, name, corev1.ClaimPending)
}

// pvcProtection is the finalizer the API server puts on every claim; the
// controller-manager (which does not run here) removes it from a deleted
// claim no pod uses.
const pvcProtection = "kubernetes.io/pvc-protection"

// deletePVC deletes a claim and, playing the controller-manager's
// pvc-protection controller, removes its kubernetes.io/pvc-protection
// finalizer (other finalizers stay).
func (r *run) deletePVC(ctx context.Context, name string) error {
	claims := r.w.env.Kube.CoreV1().PersistentVolumeClaims(r.ns)
	if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return retryConflict(func() error {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var keep []string
		for _, f := range c.Finalizers {
			if f != pvcProtection {
				keep = append(keep, f)
			}
		}
		if len(keep) == len(c.Finalizers) {
			return nil
		}
		c.Finalizers = keep
		_, err = claims.Update(ctx, c, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// snapshot creates a dynamic VolumeSnapshot of claim pvc; class "" leaves
// the class to the default.
func (r *run) snapshot(ctx context.Context, name, pvc, class string) error {
	return r.createSnapshot(ctx, name, snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc}, class)
}

// staticSnapshot creates a VolumeSnapshot of an existing content.
func (r *run) staticSnapshot(ctx context.Context, name, content, class string) error {
	return r.createSnapshot(ctx, name, snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content}, class)
}

// createSnapshot creates a VolumeSnapshot of source and learns its UID.
func (r *run) createSnapshot(ctx context.Context, name string, source snapv1.VolumeSnapshotSource, class string) error {
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns},
		Spec: snapv1.VolumeSnapshotSpec{Source: source}}
	if class != "" {
		vs.Spec.VolumeSnapshotClassName = &class
	}
	out, err := r.w.env.Snap.SnapshotV1().VolumeSnapshots(r.ns).Create(ctx, vs, metav1.CreateOptions{})
	if err == nil {
		r.learnUID(string(out.UID), "VolumeSnapshot/"+name)
	}
	return err
}

// contentName is a content name unique to the run's namespace.
func (r *run) contentName(short string) string { return r.ns + "-" + short }

// importContent creates a pre-provisioned content for handle, pre-bound to
// VolumeSnapshot vsName of the run's namespace (uid may be empty).
func (r *run) importContent(ctx context.Context, short, handle, vsName, uid, class string, policy snapv1.DeletionPolicy) error {
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: r.contentName(short)},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: r.ns, Name: vsName, UID: types.UID(uid)},
			DeletionPolicy:    policy,
			Driver:            r.driverName(),
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	if class != "" {
		c.Spec.VolumeSnapshotClassName = &class
	}
	return r.createContent(ctx, c)
}

// settleContent waits until content name is in the run's informer cache,
// then a moment more, so that binders have seen it too before a snapshot
// names it (scenarios that want the race create both back to back).
func (r *run) settleContent(ctx context.Context, name string) error {
	return settle(ctx, "content "+name, func() error {
		_, err := r.w.vsc.Get(name)
		return err
	})
}

// settle waits until get finds the object what names in an informer cache,
// then a moment more (see settleContent).
func settle(ctx context.Context, what string, get func() error) error {
	if err := framework.PollContext(ctx, 10*time.Second, what+" in the informer cache", get); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	return nil
}

func (r *run) createContent(ctx context.Context, c *snapv1.VolumeSnapshotContent) error {
	out, err := r.w.env.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.learnUID(string(out.UID), "VolumeSnapshotContent/"+r.norm(out.Name))
	return nil
}

func (r *run) deleteSnapshot(ctx context.Context, name string) error {
	return r.w.env.Snap.SnapshotV1().VolumeSnapshots(r.ns).Delete(ctx, name, metav1.DeleteOptions{})
}

func (r *run) deleteContent(ctx context.Context, name string) error {
	return r.w.env.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{})
}

// dynamicContent returns the name of the content of dynamic snapshot vs.
func (r *run) dynamicContent(ctx context.Context, vs string) (string, error) {
	v, err := r.w.env.Snap.SnapshotV1().VolumeSnapshots(r.ns).Get(ctx, vs, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return snapshot.ContentNameFor(v.UID), nil
}

// cut creates a snapshot directly on the driver, as an admin or a backup
// tool would before importing it, and returns its id.
func (r *run) cut(ctx context.Context, name, volume string) (string, error) {
	snap, err := framework.CutSnapshot(ctx, r.drv.Socket, name, volume, 20*time.Second)
	if err != nil {
		return "", err
	}
	r.ids[snap.SnapshotId] = name
	return snap.SnapshotId, nil
}

// onDriver calls f with a connection to the run's driver and a deadline of
// 20s: what an admin's tool does directly on the backend.
func (r *run) onDriver(ctx context.Context, f func(context.Context, *grpc.ClientConn) error) error {
	conn, err := framework.DialDriver(r.drv.Socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return f(ctx, conn)
}

// setFaults replaces the driver's faults (the reported size stays).
func (r *run) setFaults(ctx context.Context, rules ...framework.FaultRule) error {
	if !r.sc.NoSize {
		rules = append(rules, defaultFaults()...)
	}
	_, err := r.drv.PutFaults(ctx, framework.Faults{Rules: rules})
	return err
}

// node creates a Node with labels.
func (r *run) node(ctx context.Context, name string, labels map[string]string) error {
	_, err := r.w.env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err == nil {
		r.mu.Lock()
		r.nodes = append(r.nodes, name)
		r.mu.Unlock()
	}
	return err
}

// ---- conditions for Until ----

// snapStatus is what the conditions read of the status of a snapshot or a
// group snapshot: the zero value while either is missing.
type snapStatus struct {
	readyToUse *bool
	err        *snapv1.VolumeSnapshotError
}

func vsStatus(v *snapv1.VolumeSnapshot) snapStatus {
	if v == nil || v.Status == nil {
		return snapStatus{}
	}
	return snapStatus{v.Status.ReadyToUse, v.Status.Error}
}

func (s snapStatus) ready() bool  { return s.readyToUse != nil && *s.readyToUse }
func (s snapStatus) failed() bool { return s.err != nil }

func vsReady(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return vsStatus(o.vs[name]).ready() }
}

func vsError(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return vsStatus(o.vs[name]).failed() }
}

func vsGone(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return o.vs[name] == nil }
}

func pvcGone(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return o.pvc[name] == nil }
}

// contentsGone: no content of the run is left.
func contentsGone(_ *run, o *obs) bool { return len(o.vsc) == 0 }

// contentOf holds when the dynamic content of vs satisfies cond.
func contentOf(vs string, cond func(*snapv1.VolumeSnapshotContent) bool) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool {
		v := o.vs[vs]
		if v == nil {
			return false
		}
		c := o.vsc[snapshot.ContentNameFor(v.UID)]
		return c != nil && cond(c)
	}
}

// vsBound holds once snapshot name names its content in its status.
func vsBound(name string) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool {
		v := o.vs[name]
		return v != nil && v.Status != nil && v.Status.BoundVolumeSnapshotContentName != nil
	}
}

func backendCount(n int) func(*run, *obs) bool {
	return func(_ *run, o *obs) bool { return len(o.backend) == n }
}

func all(conds ...func(*run, *obs) bool) func(*run, *obs) bool {
	return func(r *run, o *obs) bool {
		for _, c := range conds {
			if !c(r, o) {
				return false
			}
		}
		return true
	}
}

func seq(actions ...func(context.Context, *run) error) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		var errs []error
		for _, a := range actions {
			if err := a(ctx, r); err != nil {
				errs = append(errs, err)
				break
			}
		}
		return errors.Join(errs...)
	}
}

func corev1Ref(ns, name string) corev1.ObjectReference {
	return corev1.ObjectReference{Namespace: ns, Name: name}
}
