package conformance

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubeinformers "k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// world is one pairing's control plane with informers that every scenario
// of the pairing observes through (no polling of the API server).
type world struct {
	env      *framework.Env
	pairing  pairing
	vs       snaplisters.VolumeSnapshotLister
	vsc      snaplisters.VolumeSnapshotContentLister
	vgs      grouplisters.VolumeGroupSnapshotLister
	vgsc     grouplisters.VolumeGroupSnapshotContentLister
	pvc      corelisters.PersistentVolumeClaimLister
	events   corelisters.EventLister
	stopInfo chan struct{}
}

func newWorld(env *framework.Env, p pairing) (*world, error) {
	w := &world{env: env, pairing: p, stopInfo: make(chan struct{})}
	sf := snapinformers.NewSharedInformerFactory(env.Snap, 0)
	kf := kubeinformers.NewSharedInformerFactory(env.Kube, 0)
	w.vs = sf.Snapshot().V1().VolumeSnapshots().Lister()
	w.vsc = sf.Snapshot().V1().VolumeSnapshotContents().Lister()
	w.vgs = sf.Groupsnapshot().V1().VolumeGroupSnapshots().Lister()
	w.vgsc = sf.Groupsnapshot().V1().VolumeGroupSnapshotContents().Lister()
	w.pvc = kf.Core().V1().PersistentVolumeClaims().Lister()
	w.events = kf.Core().V1().Events().Lister()
	sf.Start(w.stopInfo)
	kf.Start(w.stopInfo)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for typ, ok := range sf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer %v did not sync", typ)
		}
	}
	for typ, ok := range kf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer %v did not sync", typ)
		}
	}
	return w, nil
}

func (w *world) stop() { close(w.stopInfo) }

// obs is what a run sees at one moment: its namespace's snapshots, group
// snapshots and claims, its driver's contents and group contents, their
// events, the driver's snapshots and group snapshots.
type obs struct {
	vs      map[string]*snapv1.VolumeSnapshot
	vsc     map[string]*snapv1.VolumeSnapshotContent
	vgs     map[string]*groupv1.VolumeGroupSnapshot
	vgsc    map[string]*groupv1.VolumeGroupSnapshotContent
	pvc     map[string]*corev1.PersistentVolumeClaim
	events  []*corev1.Event
	backend []framework.BackendSnapshot
	groups  []framework.BackendGroup
}

// observe reads the caches and the driver, and learns the UIDs and
// snapshot ids it sees for normalization.
func (r *run) observe(ctx context.Context) (*obs, error) {
	o := &obs{vs: map[string]*snapv1.VolumeSnapshot{}, vsc: map[string]*snapv1.VolumeSnapshotContent{}, pvc: map[string]*corev1.PersistentVolumeClaim{},
		vgs: map[string]*groupv1.VolumeGroupSnapshot{}, vgsc: map[string]*groupv1.VolumeGroupSnapshotContent{}}
	// Groups first: their UIDs name their members.
	if err := r.observeGroups(o); err != nil {
		return nil, err
	}
	vss, err := r.w.vs.VolumeSnapshots(r.ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, v := range vss {
		o.vs[v.Name] = v
		r.learnUID(string(v.UID), "VolumeSnapshot/"+v.Name)
	}
	pvcs, err := r.w.pvc.PersistentVolumeClaims(r.ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, c := range pvcs {
		o.pvc[c.Name] = c
		r.learnUID(string(c.UID), "PersistentVolumeClaim/"+c.Name)
	}
	vscs, err := r.w.vsc.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, c := range vscs {
		if c.Spec.Driver != r.drv.Name && c.Spec.VolumeSnapshotRef.Namespace != r.ns {
			continue
		}
		o.vsc[c.Name] = c
		r.learnUID(string(c.UID), "VolumeSnapshotContent/"+r.norm(c.Name))
		if h := contentHandle(c); h != "" {
			r.handlePolicy[h] = c.Spec.DeletionPolicy
		}
	}
	evs, err := r.w.events.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		io := e.InvolvedObject
		if io.Namespace == r.ns || (io.Kind == "VolumeSnapshotContent" && (o.vsc[io.Name] != nil || r.seenContents[io.Name])) ||
			(io.Kind == "VolumeGroupSnapshotContent" && (o.vgsc[io.Name] != nil || r.seenGroupContents[io.Name])) {
			o.events = append(o.events, e)
		}
	}
	for name := range o.vsc {
		r.seenContents[name] = true
	}
	for name := range o.vgsc {
		r.seenGroupContents[name] = true
	}
	if r.drv != nil {
		o.backend, err = r.drv.GetCreated(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range o.backend {
			if b.Name != "" {
				r.ids[b.ID] = b.Name
			}
		}
		o.groups, err = r.drv.GetGroups(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range o.groups {
			if g.Name != "" {
				r.ids[g.ID] = g.Name
			}
		}
		if err := r.pollCalls(ctx); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// pollCalls appends the driver's new calls to the run's log, tagged with
// the current step.
func (r *run) pollCalls(ctx context.Context) error {
	log, err := r.drv.GetCallLog(ctx, r.lastSeq)
	if err != nil {
		return err
	}
	for _, e := range log.Entries {
		r.lastSeq = e.Seq
		if e.SnapshotID != "" && e.Name != "" {
			r.ids[e.SnapshotID] = e.Name
		}
		if groupMethods[e.Method] && e.GroupSnapshotID != "" && e.Name != "" {
			r.ids[e.GroupSnapshotID] = e.Name
		}
		r.calls = append(r.calls, stepCall{step: r.step, e: e})
	}
	return nil
}

type stepCall struct {
	step int
	e    framework.CallLogEntry
}

func contentHandle(c *snapv1.VolumeSnapshotContent) string {
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		return *c.Status.SnapshotHandle
	}
	if c.Spec.Source.SnapshotHandle != nil {
		return *c.Spec.Source.SnapshotHandle
	}
	return ""
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func (r *run) learnUID(uid, what string) {
	if uid != "" {
		if _, ok := r.uids[uid]; !ok {
			r.uids[uid] = "<uid:" + what + ">"
		}
	}
}

// norm replaces UIDs by placeholders naming their object, the hashes in
// group member names by the member they name, and the namespace by <ns>,
// so that values compare across pairings.
func (r *run) norm(s string) string {
	s = uuidRE.ReplaceAllStringFunc(s, func(u string) string {
		if p, ok := r.uids[u]; ok {
			return p
		}
		return "<uid:?>"
	})
	s = r.normHash(s)
	if r.ns != "" {
		s = strings.ReplaceAll(s, r.ns, "<ns>")
	}
	return s
}

// handle names a snapshot id by the CSI name it was cut with.
func (r *run) handle(id string) string {
	if name, ok := r.ids[id]; ok {
		return "id-of(" + r.norm(name) + ")"
	}
	if _, err := strconv.Atoi(id); err == nil {
		return "<unknown numeric id>"
	}
	return r.norm(id)
}

// outcome is a flat, normalized record: path -> value. Sets are flattened
// into one path per element ("...finalizers[x]" = "present"), so a
// difference always names one element.
type outcome map[string]string

func (o outcome) set(path, value string) { o[path] = value }

func boolStr(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

// stepSummary is what a step leaves: every object in detail (objects seen
// earlier in the run show as absent), the backend's snapshots and the CSI
// calls first made during the step.
func (r *run) stepSummary(o *obs, idx int, name string, out outcome) {
	pre := fmt.Sprintf("s%d:%s.", idx, name)
	r.objects(pre, o, out)
	for _, b := range o.backend {
		n := b.Name
		if n == "" {
			n = "id " + b.ID
		}
		out.set(pre+"backend["+r.norm(n)+"]", "present")
	}
	for _, g := range o.groups {
		out.set(pre+"backendGroup["+r.norm(g.Name)+"]", fmt.Sprintf("%d members", len(g.SnapshotIDs)))
	}
	// Calls: the signatures first seen in this step. A call repeated in a
	// later step (a retry with backoff, a poll) is not listed again, so
	// when a retry happens relative to a step boundary does not matter.
	seen := map[string]bool{}
	for _, c := range r.calls {
		sig := r.callSignature(c.e)
		if sig == "" || seen[sig] {
			continue
		}
		seen[sig] = true
		if c.step == idx {
			out.set(pre+"calls["+sig+"]", "called")
		}
	}
}

func state(deleting bool) string {
	if deleting {
		return "terminating"
	}
	return "present"
}

// known returns the names of objects of kind seen at any time in the run,
// now holding those seen at this moment (so that an object that went shows
// as "absent"), sorted.
func known[T any](r *run, kind string, now map[string]T) []string {
	set := r.everSeen[kind]
	if set == nil {
		set = map[string]bool{}
		r.everSeen[kind] = set
	}
	for n := range now {
		set[n] = true
	}
	return keys(set)
}

// snapshotMethods are the CSI calls compared, with the group calls;
// identity, capability and probe calls differ by design (start-up, health)
// and are left out.
var snapshotMethods = map[string]bool{"CreateSnapshot": true, "DeleteSnapshot": true, "ListSnapshots": true,
	"CreateVolumeGroupSnapshot": true, "GetVolumeGroupSnapshot": true, "DeleteVolumeGroupSnapshot": true}

// groupMethods are the calls of the CSI GroupController.
var groupMethods = map[string]bool{"CreateVolumeGroupSnapshot": true, "GetVolumeGroupSnapshot": true, "DeleteVolumeGroupSnapshot": true}

// callSignature is a call without its timing or count: method, snapshot,
// secret keys, parameters and result code.
func (r *run) callSignature(e framework.CallLogEntry) string {
	if !snapshotMethods[e.Method] {
		return ""
	}
	var b strings.Builder
	b.WriteString(e.Method)
	switch {
	case e.Method == "CreateSnapshot":
		b.WriteString(" name=" + r.norm(e.Name) + " volume=" + r.norm(e.SourceVolumeID))
	case groupMethods[e.Method]:
		b.WriteString(r.groupCallArgs(e))
	case e.Name != "":
		b.WriteString(" snapshot=" + r.norm(e.Name))
	case e.SnapshotID != "":
		b.WriteString(" id=" + r.handle(e.SnapshotID))
	default:
		b.WriteString(" (all)")
	}
	if len(e.SecretKeys) > 0 {
		b.WriteString(" secrets=" + strings.Join(e.SecretKeys, ","))
	}
	if len(e.Parameters) > 0 {
		var ps []string
		for _, k := range keys(e.Parameters) {
			ps = append(ps, k+"="+r.norm(e.Parameters[k]))
		}
		b.WriteString(" params={" + strings.Join(ps, ",") + "}")
	}
	b.WriteString(" -> " + e.Code)
	return b.String()
}

// knownAnnotations are the keys whose values are compared; other keys are
// compared by presence only.
var knownAnnotations = map[string]bool{
	snapshot.AnnBeingCreated: true, snapshot.AnnBeingDeleted: true,
	snapshot.AnnDeletionSecretName: true, snapshot.AnnDeletionSecretNamespace: true,
	snapshot.AnnAllowVolumeModeChange: true, snapshot.AnnDefaultClass: true,
	snapshot.AnnVolumeGroupSnapshotHandle: true,
}

func (r *run) meta(pre string, ann, lab map[string]string, fin []string, owners []string, out outcome) {
	for k, v := range ann {
		if k == "kubectl.kubernetes.io/last-applied-configuration" {
			continue
		}
		if k == snapshot.AnnVolumeGroupSnapshotHandle {
			out.set(pre+"annotations["+k+"]", r.handle(v))
		} else if knownAnnotations[k] {
			out.set(pre+"annotations["+k+"]", r.norm(v))
		} else {
			out.set(pre+"annotations["+k+"]", "set")
		}
	}
	for k, v := range lab {
		out.set(pre+"labels["+k+"]", r.norm(v))
	}
	for _, f := range fin {
		out.set(pre+"finalizers["+f+"]", "present")
	}
	for _, o := range owners {
		out.set(pre+"ownerReferences["+r.norm(o)+"]", "present")
	}
}

func timeStr(set bool, zero bool) string {
	switch {
	case !set:
		return "unset"
	case zero:
		return "epoch"
	}
	return "set"
}

// metaTime and unixTime are timeStr of a status's creationTime.
func metaTime(t *metav1.Time) string { return timeStr(t != nil, t != nil && t.Unix() == 0) }
func unixTime(t *int64) string       { return timeStr(t != nil, t != nil && *t == 0) }

// recordObject records whether an object of the run exists: "absent" when
// obj is nil (and false), else its deletion state and metadata.
func recordObject[T interface {
	comparable
	metav1.Object
}](r *run, pre string, obj T, out outcome) bool {
	var none T
	if obj == none {
		out.set(pre+"exists", "absent")
		return false
	}
	out.set(pre+"exists", state(obj.GetDeletionTimestamp() != nil))
	r.meta(pre, obj.GetAnnotations(), obj.GetLabels(), obj.GetFinalizers(), owners(obj.GetOwnerReferences()), out)
	return true
}

// recordStatus records what the statuses of the snapshot and content
// kinds, single and group, have in common.
func (r *run) recordStatus(pre string, ready *bool, creationTime string, e *snapv1.VolumeSnapshotError, out outcome) {
	out.set(pre+"status.readyToUse", boolStr(ready))
	out.set(pre+"status.creationTime", creationTime)
	r.statusError(pre, e, out)
}

// recordContentSpec records what the specs of the content kinds, single
// and group, have in common; kind names their fields ("Snapshot",
// "GroupSnapshot").
func (r *run) recordContentSpec(pre, kind string, policy snapv1.DeletionPolicy, driver string, class *string, ref corev1.ObjectReference, out outcome) {
	out.set(pre+"spec.deletionPolicy", string(policy))
	out.set(pre+"spec.driver", driver)
	setOptional(out, pre+"spec.volume"+kind+"ClassName", class, asIs)
	out.set(pre+"spec.volume"+kind+"Ref", r.ref(ref))
}

// setOptional records path as show(*v) when v is set: a field left out
// is not recorded.
func setOptional[T any](out outcome, path string, v *T, show func(T) string) {
	if v != nil {
		out.set(path, show(*v))
	}
}

func asIs(s string) string { return s }

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

// ref is a content's reference to its snapshot or group, normalized.
func (r *run) ref(ref corev1.ObjectReference) string {
	return r.norm(fmt.Sprintf("%s %s %s/%s uid=%s", ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, ref.UID))
}

// final records the events seen during the whole run (by kind, type and
// reason: their timing is too loose to pin to a step).
func (r *run) final(o *obs, out outcome) {
	for _, e := range o.events {
		kind := e.InvolvedObject.Kind
		out.set("events."+kind+"["+e.Type+":"+e.Reason+"]", "seen")
	}
}

// objects records every object of the run in detail under prefix p.
func (r *run) objects(p string, o *obs, out outcome) {
	recordKind(r, p, "VolumeSnapshot", o.vs, r.normHash, out, r.recordSnapshot)
	recordKind(r, p, "VolumeSnapshotContent", o.vsc, r.norm, out, r.recordContent)
	recordKind(r, p, "PersistentVolumeClaim", o.pvc, asIs, out, func(pre string, c *corev1.PersistentVolumeClaim, out outcome) {
		out.set(pre+"status.phase", string(c.Status.Phase))
	})
	r.groupObjects(p, o, out)
}

// recordKind records every object of kind the run has seen, under prefix p
// and its name as shown by name: whether it exists now (in now) and, if
// so, its metadata and what detail records.
func recordKind[T interface {
	comparable
	metav1.Object
}](r *run, p, kind string, now map[string]T, name func(string) string, out outcome, detail func(pre string, obj T, out outcome)) {
	for _, n := range known(r, kind, now) {
		pre := p + kind + "/" + name(n) + "."
		if obj := now[n]; recordObject(r, pre, obj, out) {
			detail(pre, obj, out)
		}
	}
}

func (r *run) recordSnapshot(pre string, v *snapv1.VolumeSnapshot, out outcome) {
	setOptional(out, pre+"spec.volumeSnapshotClassName", v.Spec.VolumeSnapshotClassName, asIs)
	switch src := v.Spec.Source; {
	case src.PersistentVolumeClaimName != nil:
		out.set(pre+"spec.source.persistentVolumeClaimName", *src.PersistentVolumeClaimName)
	case src.VolumeSnapshotContentName != nil:
		out.set(pre+"spec.source.volumeSnapshotContentName", r.norm(*src.VolumeSnapshotContentName))
	}
	if s := v.Status; statusSet(out, pre, s) {
		setOptional(out, pre+"status.boundVolumeSnapshotContentName", s.BoundVolumeSnapshotContentName, r.norm)
		r.recordStatus(pre, s.ReadyToUse, metaTime(s.CreationTime), s.Error, out)
		setOptional(out, pre+"status.restoreSize", s.RestoreSize, func(q resource.Quantity) string { return q.String() })
		setOptional(out, pre+"status.volumeGroupSnapshotName", s.VolumeGroupSnapshotName, asIs)
	}
}

func (r *run) recordContent(pre string, c *snapv1.VolumeSnapshotContent, out outcome) {
	sp := c.Spec
	r.recordContentSpec(pre, "Snapshot", sp.DeletionPolicy, sp.Driver, sp.VolumeSnapshotClassName, sp.VolumeSnapshotRef, out)
	setOptional(out, pre+"spec.source.volumeHandle", sp.Source.VolumeHandle, r.norm)
	setOptional(out, pre+"spec.source.snapshotHandle", sp.Source.SnapshotHandle, r.handle)
	setOptional(out, pre+"spec.sourceVolumeMode", sp.SourceVolumeMode, func(m corev1.PersistentVolumeMode) string { return string(m) })
	if s := c.Status; statusSet(out, pre, s) {
		setOptional(out, pre+"status.snapshotHandle", s.SnapshotHandle, r.handle)
		r.recordStatus(pre, s.ReadyToUse, unixTime(s.CreationTime), s.Error, out)
		setOptional(out, pre+"status.restoreSize", s.RestoreSize, formatInt)
		setOptional(out, pre+"status.volumeGroupSnapshotHandle", s.VolumeGroupSnapshotHandle, r.handle)
	}
}

// statusError records a status.error of any snapshot kind: set or not, and
// its message.
func (r *run) statusError(pre string, e *snapv1.VolumeSnapshotError, out outcome) {
	if e == nil {
		return
	}
	out.set(pre+"status.error", "set")
	setOptional(out, pre+"status.error.message", e.Message, r.norm)
}

func owners(refs []metav1.OwnerReference) []string {
	var out []string
	for _, o := range refs {
		out = append(out, o.Kind+"/"+o.Name)
	}
	return out
}

// fingerprint is a cheap digest of what a run sees, for settling.
func (r *run) fingerprint(o *obs) string {
	out := outcome{}
	r.stepSummary(o, r.step, "x", out)
	r.final(o, out)
	var b strings.Builder
	for _, k := range keys(out) {
		b.WriteString(k + "=" + out[k] + "\n")
	}
	return b.String()
}

// statusSet records a status left unset and reports whether s is set.
func statusSet[S any](out outcome, pre string, s *S) bool {
	if s == nil {
		out.set(pre+"status", "unset")
	}
	return s != nil
}
