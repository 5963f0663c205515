package testkit

import (
	"strconv"
	"sync"
	"testing"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// The resources the getters of API read.
var (
	SnapshotsGVR = snapv1.SchemeGroupVersion.WithResource("volumesnapshots")
	ContentsGVR  = snapv1.SchemeGroupVersion.WithResource("volumesnapshotcontents")
	ClaimsGVR    = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")

	GroupSnapshotsGVR = groupv1.SchemeGroupVersion.WithResource("volumegroupsnapshots")
	GroupContentsGVR  = groupv1.SchemeGroupVersion.WithResource("volumegroupsnapshotcontents")
)

// API is a fake API server: the fake clientsets Snap and Kube, with
// reactors in front of their object trackers that behave like the API
// server where the controllers depend on it, for every resource:
//
//   - every create, update and patch stores a fresh resourceVersion, and an
//     update, or a merge patch that carries metadata.resourceVersion, of an
//     object whose resourceVersion is another fails with a conflict;
//   - a write of the status subresource changes only the status, a write of
//     the object everything but the status and metadata.deletionTimestamp;
//   - a delete of an object with finalizers sets its deletionTimestamp
//     (Time) and leaves it; the write that removes the last finalizer of an
//     object being deleted removes the object; delete preconditions (UID,
//     resourceVersion) are checked;
//   - Inject makes requests fail.
//
// Patches must be JSON merge patches, the only kind the controllers send.
// The clientsets record every request (Actions); Writes lists the writes.
type API struct {
	Snap *snapfake.Clientset
	Kube *kubefake.Clientset

	t      testing.TB
	mu     sync.Mutex
	rv     int
	faults []*Fault
}

// NewAPI returns a fake API server that holds objs: the types of client-go's
// scheme (claims, volumes, secrets, nodes) in Kube, the others in Snap.
func NewAPI(t testing.TB, objs ...runtime.Object) *API {
	t.Helper()
	var kubeObjs, snapObjs []runtime.Object
	for _, o := range objs {
		if _, _, err := kubescheme.Scheme.ObjectKinds(o); err == nil {
			kubeObjs = append(kubeObjs, o)
		} else {
			snapObjs = append(snapObjs, o)
		}
	}
	a := &API{
		//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
		Snap: snapfake.NewSimpleClientset(snapObjs...),
		Kube: kubefake.NewClientset(kubeObjs...),
		t:    t,
		rv:   100,
	}
	a.serve(a.Snap)
	a.serve(a.Kube)
	return a
}

// Fault makes the next Times requests (at least one) of Verb on Resource
// and Subresource ("" for the object itself) fail with Err.
type Fault struct {
	Verb, Resource, Subresource string
	Err                         error
	Times                       int
}

// Inject adds faults; they apply to both clientsets, before any other
// reactor, in the order given.
func (a *API) Inject(faults ...Fault) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range faults {
		f.Times = max(f.Times, 1)
		a.faults = append(a.faults, &f)
	}
}

func (a *API) injected(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range a.faults {
		if f.Times > 0 && action.Matches(f.Verb, f.Resource) && action.GetSubresource() == f.Subresource {
			f.Times--
			return true, nil, f.Err
		}
	}
	return false, nil, nil
}

func (a *API) nextRV() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	return strconv.Itoa(a.rv)
}

// Write is one write request sent to the API server.
type Write struct {
	Verb, Resource, Subresource string
	// Patch is the body of a patch.
	Patch string
}

// String is "verb resource" or "verb resource/subresource".
func (w Write) String() string {
	if w.Subresource == "" {
		return w.Verb + " " + w.Resource
	}
	return w.Verb + " " + w.Resource + "/" + w.Subresource
}

// Writes lists the requests other than get, list and watch sent since the
// last ClearActions, failed ones included: Snap's in order, then Kube's.
func (a *API) Writes() []Write {
	var out []Write
	for _, action := range append(a.Snap.Actions(), a.Kube.Actions()...) {
		switch action.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		w := Write{Verb: action.GetVerb(), Resource: action.GetResource().Resource, Subresource: action.GetSubresource()}
		if p, ok := action.(k8stesting.PatchAction); ok {
			w.Patch = string(p.GetPatch())
		}
		out = append(out, w)
	}
	return out
}

// ClearActions forgets the requests recorded so far by both clientsets.
func (a *API) ClearActions() {
	a.Snap.ClearActions()
	a.Kube.ClearActions()
}

// Snapshot is the VolumeSnapshot as the API server holds it, nil if none.
func (a *API) Snapshot(namespace, name string) *snapv1.VolumeSnapshot {
	return stored[*snapv1.VolumeSnapshot](a, a.Snap.Tracker(), SnapshotsGVR, namespace, name)
}

// Content is the VolumeSnapshotContent as the API server holds it, nil if
// none.
func (a *API) Content(name string) *snapv1.VolumeSnapshotContent {
	return stored[*snapv1.VolumeSnapshotContent](a, a.Snap.Tracker(), ContentsGVR, "", name)
}

// GroupSnapshot is the VolumeGroupSnapshot as the API server holds it, nil
// if none.
func (a *API) GroupSnapshot(namespace, name string) *groupv1.VolumeGroupSnapshot {
	return stored[*groupv1.VolumeGroupSnapshot](a, a.Snap.Tracker(), GroupSnapshotsGVR, namespace, name)
}

// GroupContent is the VolumeGroupSnapshotContent as the API server holds
// it, nil if none.
func (a *API) GroupContent(name string) *groupv1.VolumeGroupSnapshotContent {
	return stored[*groupv1.VolumeGroupSnapshotContent](a, a.Snap.Tracker(), GroupContentsGVR, "", name)
}

// Claim is the PersistentVolumeClaim as the API server holds it, nil if
// none.
func (a *API) Claim(namespace, name string) *corev1.PersistentVolumeClaim {
	return stored[*corev1.PersistentVolumeClaim](a, a.Kube.Tracker(), ClaimsGVR, namespace, name)
}

// Contents lists the VolumeSnapshotContents the API server holds.
func (a *API) Contents() []*snapv1.VolumeSnapshotContent {
	a.t.Helper()
	list, err := a.Snap.Tracker().List(ContentsGVR, snapv1.SchemeGroupVersion.WithKind("VolumeSnapshotContent"), "")
	if err != nil {
		a.t.Fatal(err)
	}
	var out []*snapv1.VolumeSnapshotContent
	for i := range list.(*snapv1.VolumeSnapshotContentList).Items {
		out = append(out, &list.(*snapv1.VolumeSnapshotContentList).Items[i])
	}
	return out
}

// GroupContents lists the VolumeGroupSnapshotContents the API server holds.
func (a *API) GroupContents() []*groupv1.VolumeGroupSnapshotContent {
	a.t.Helper()
	list, err := a.Snap.Tracker().List(GroupContentsGVR, groupv1.SchemeGroupVersion.WithKind("VolumeGroupSnapshotContent"), "")
	if err != nil {
		a.t.Fatal(err)
	}
	var out []*groupv1.VolumeGroupSnapshotContent
	for i := range list.(*groupv1.VolumeGroupSnapshotContentList).Items {
		out = append(out, &list.(*groupv1.VolumeGroupSnapshotContentList).Items[i])
	}
	return out
}

func stored[T runtime.Object](a *API, tracker k8stesting.ObjectTracker, gvr schema.GroupVersionResource, ns, name string) T {
	a.t.Helper()
	var none T
	obj, err := tracker.Get(gvr, ns, name)
	if apierrors.IsNotFound(err) {
		return none
	}
	if err != nil {
		a.t.Fatalf("%s %s: %v", gvr.Resource, name, err)
	}
	return obj.(T)
}

// Events drains the events rec recorded so far.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
