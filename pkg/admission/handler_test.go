package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

const testUID = types.UID("9f1c6c1e-0000-4000-8000-000000000001")

// reviewOpt shapes a review request for a test.
type reviewOpt func(*admissionv1.AdmissionReview)

// newReview builds a CREATE review of obj for its resource.
func newReview(t *testing.T, resource string, obj any, opts ...reviewOpt) *admissionv1.AdmissionReview {
	t.Helper()
	info := resources[resource]
	r := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewV1, Kind: reviewKind},
		Request: &admissionv1.AdmissionRequest{
			UID:       testUID,
			Kind:      metav1.GroupVersionKind{Group: info.gvr.Group, Version: info.gvr.Version, Kind: info.kind},
			Resource:  metav1.GroupVersionResource{Group: info.gvr.Group, Version: info.gvr.Version, Resource: resource},
			Operation: admissionv1.Create,
			Object:    raw(t, obj),
		},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func asUpdate(t *testing.T, old any) reviewOpt {
	return func(r *admissionv1.AdmissionReview) {
		r.Request.Operation = admissionv1.Update
		r.Request.OldObject = raw(t, old)
	}
}

func withOperation(op admissionv1.Operation) reviewOpt {
	return func(r *admissionv1.AdmissionReview) { r.Request.Operation = op }
}

func withSubResource(s string) reviewOpt {
	return func(r *admissionv1.AdmissionReview) { r.Request.SubResource = s }
}

func withKind(kind string) reviewOpt {
	return func(r *admissionv1.AdmissionReview) { r.Request.Kind.Kind = kind }
}

func withAPIVersion(v string) reviewOpt {
	return func(r *admissionv1.AdmissionReview) { r.APIVersion = v }
}

// newTestHandler serves a world of objects.
func newTestHandler(t *testing.T, opts validation.Options, objs ...any) *Handler {
	t.Helper()
	l := &validation.StaticLookup{}
	if err := l.Add(objs...); err != nil {
		t.Fatal(err)
	}
	return NewHandler(func(context.Context) validation.Lookup { return l }, opts, 1<<20, nil)
}

// send sends a request with body (and contentType, unless "") to h and
// decodes the answer, which must be an AdmissionReview with a response.
func send(t *testing.T, h http.Handler, method, target string, body io.Reader, contentType string) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer is not an AdmissionReview (status %d): %v\n%s", rec.Code, err, rec.Body.String())
	}
	if out.Response == nil {
		t.Fatalf("answer has no response (status %d): %s", rec.Code, rec.Body.String())
	}
	return rec, &out
}

// post sends body to the handler's endpoint and decodes the answer.
func post(t *testing.T, h http.Handler, body []byte, contentType string) (int, *admissionv1.AdmissionReview) {
	t.Helper()
	rec, out := send(t, h, http.MethodPost, "/validate", bytes.NewReader(body), contentType)
	return rec.Code, out
}

// postReview posts review r as JSON to h and decodes the answer.
func postReview(t *testing.T, h http.Handler, r *admissionv1.AdmissionReview) (int, *admissionv1.AdmissionReview) {
	t.Helper()
	return post(t, h, marshal(t, r), "application/json")
}

// marshal is the JSON of a review.
func marshal(t *testing.T, r *admissionv1.AdmissionReview) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// padded is body, a JSON object, with a "pad" string field of n bytes.
func padded(body []byte, n int) []byte {
	return append(append([]byte{}, body[:len(body)-1]...), []byte(`,"pad":"`+strings.Repeat("x", n)+`"}`)...)
}

func TestHandlerVerdicts(t *testing.T) {
	world := []any{NewClass("standard", AsDefault()), NewSnapshot("ns", "going", FromPVC("d"), Deleting())}
	tests := map[string]struct {
		endpoint    string
		review      func(t *testing.T) *admissionv1.AdmissionReview
		wantAllowed bool
		wantCode    int32
		wantMessage string
		wantWarning string
		wantVersion string
	}{
		"a valid class is admitted": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshotclasses", NewClass("fast"))
			},
			wantAllowed: true,
		},
		"a second default class is denied with 403 and the rule's message": {
			endpoint: "volumesnapshotclasses",
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshotclasses", NewClass("fast", AsDefault()))
			},
			wantCode:    http.StatusForbidden,
			wantMessage: `VolumeSnapshotClass "fast" cannot be the default for driver "hostpath.csi.k8s.io": "standard" already is`,
		},
		"warnings travel with an admitted object": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", NewSnapshot("ns", "s", FromPVC("later")))
			},
			wantAllowed: true,
			wantWarning: `PersistentVolumeClaim "later" does not exist yet`,
		},
		"a v1beta1 review is answered in v1beta1": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshotclasses", NewClass("fast"), withAPIVersion(reviewV1beta1))
			},
			wantAllowed: true,
			wantVersion: reviewV1beta1,
		},
		"a delete is admitted without looking": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshotclasses", nil, withOperation(admissionv1.Delete))
			},
			wantAllowed: true,
		},
		"a status update is admitted without looking": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", NewSnapshot("ns", "s"), withSubResource("status"), asUpdate(t, nil))
			},
			wantAllowed: true,
		},
		"a ratcheted update is admitted": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", NewSnapshot("ns", "s", WithLabel("a", "b")), asUpdate(t, NewSnapshot("ns", "s")))
			},
			wantAllowed: true,
		},
		"an update that changes the source is denied": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", NewSnapshot("ns", "s", FromPVC("b")), asUpdate(t, NewSnapshot("ns", "s", FromPVC("a"))))
			},
			wantCode:    http.StatusForbidden,
			wantMessage: "cannot change spec.source",
		},
		"an update without oldObject is an error": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", NewSnapshot("ns", "s", FromPVC("b")), asUpdate(t, nil))
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: `UPDATE of VolumeSnapshot "" without oldObject`,
		},
		"a create without object is an error": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", nil)
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: "request has no object",
		},
		"a kind that does not match the resource is an error": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshots", NewSnapshot("ns", "s"), withKind("VolumeSnapshotClass"))
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: "does not match resource",
		},
		"a request for another resource than the endpoint's is an error": {
			endpoint: "volumesnapshots",
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "volumesnapshotclasses", NewClass("fast"))
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: "this endpoint validates volumesnapshots",
		},
		"an object whose own kind differs from the request's is an error": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				c := NewClass("fast")
				c.Kind, c.APIVersion = "VolumeSnapshot", "snapshot.storage.k8s.io/v1"
				return newReview(t, "volumesnapshotclasses", c)
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: "object is a snapshot.storage.k8s.io/v1, Kind=VolumeSnapshot",
		},
		"an object that does not decode is an error": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				r := newReview(t, "volumesnapshotclasses", nil)
				r.Request.Object.Raw = []byte(`{"driver": 42}`)
				return r
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: "cannot decode object as VolumeSnapshotClass",
		},
		"a claim judged before the API server filled in its namespace gets the request's": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				r := newReview(t, "persistentvolumeclaims", NewPVC("", "p", RestoresFrom("going")))
				r.Request.Namespace = "ns"
				return r
			},
			wantCode:    http.StatusForbidden,
			wantMessage: `PersistentVolumeClaim "ns/p" restores from VolumeSnapshot "ns/going", which is being deleted`,
		},
		"an unknown resource is an error": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				r := newReview(t, "volumesnapshots", NewSnapshot("ns", "s"))
				r.Request.Resource.Resource = "pods"
				return r
			},
			wantCode:    http.StatusBadRequest,
			wantMessage: `no rules for resource "pods"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newTestHandler(t, validation.Options{}, world...)
			status, out := postReview(t, h.Endpoint(tc.endpoint), tc.review(t))
			if status != http.StatusOK {
				t.Errorf("HTTP status %d, want 200 for a review with a UID", status)
			}
			resp := out.Response
			if resp.UID != testUID {
				t.Errorf("response UID %q, want the request's %q", resp.UID, testUID)
			}
			if want := tc.wantVersion; want != "" && out.APIVersion != want {
				t.Errorf("apiVersion %q, want %q", out.APIVersion, want)
			}
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !tc.wantAllowed {
				if resp.Result == nil || resp.Result.Code != tc.wantCode || !strings.Contains(resp.Result.Message, tc.wantMessage) {
					t.Errorf("result %+v, want code %d and a message containing %q", resp.Result, tc.wantCode, tc.wantMessage)
				}
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tc.wantWarning) {
				t.Errorf("warnings %q do not contain %q", resp.Warnings, tc.wantWarning)
			}
		})
	}
}

// panicLookup fails every rule that reads the world.
type panicLookup struct{ validation.StaticLookup }

func (*panicLookup) ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error) {
	panic("lookup exploded")
}

func TestHandlerRecoversPanicsAndKeepsTheUID(t *testing.T) {
	h := NewHandler(func(context.Context) validation.Lookup { return &panicLookup{} }, validation.Options{}, 0, nil)
	status, out := postReview(t, h.Endpoint(""), newReview(t, "volumesnapshotclasses", NewClass("fast", AsDefault())))
	if status != http.StatusOK || out.Response.UID != testUID {
		t.Fatalf("status %d, UID %q: want 200 and the request's UID", status, out.Response.UID)
	}
	if r := out.Response.Result; out.Response.Allowed || r == nil || r.Code != http.StatusInternalServerError ||
		!strings.Contains(r.Message, "lookup exploded") {
		t.Errorf("response %+v, want a 500 error naming the panic", out.Response)
	}
}
