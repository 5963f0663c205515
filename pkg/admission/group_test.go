package admission

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// groupWorld holds a default group class and claims of two drivers.
func groupWorld() []any {
	return []any{
		NewGroupClass("group-standard", AsGroupDefault()),
		NewPVC("ns", "data", WithLabel("app", "db"), BoundClaim("pv-data")),
		NewPVC("ns", "cache", WithLabel("app", "mixed"), BoundClaim("pv-cache")),
		NewPVC("ns", "other", WithLabel("app", "mixed"), BoundClaim("pv-other")),
		NewPVC("ns", "pending", WithLabel("app", "late")),
		NewPV("pv-data", DefaultDriver), NewPV("pv-cache", DefaultDriver), NewPV("pv-other", "other.csi.example.com"),
	}
}

// The three group kinds are routed to their rules, through their own
// endpoint and through the generic /validate.
func TestHandlerRoutesGroupKinds(t *testing.T) {
	tests := map[string]struct {
		resource    string
		endpoint    string
		review      func(t *testing.T, resource string) *admissionv1.AdmissionReview
		wantMessage string // "" means admitted
		wantWarning string
	}{
		"a second default group class is denied on its endpoint": {
			resource: "volumegroupsnapshotclasses", endpoint: "volumegroupsnapshotclasses",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupClass("group-fast", AsGroupDefault()))
			},
			wantMessage: `VolumeGroupSnapshotClass "group-fast" cannot be the default for driver "hostpath.csi.k8s.io": "group-standard" already is`,
		},
		"a group class that is not default is admitted": {
			resource: "volumegroupsnapshotclasses",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupClass("group-fast"))
			},
		},
		"a group of claims of two drivers is denied": {
			resource: "volumegroupsnapshots", endpoint: "volumegroupsnapshots",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupSnapshot("ns", "g", Selecting("app", "mixed")))
			},
			wantMessage: `selects volumes of 2 CSI drivers`,
		},
		"a group of an unbound claim is denied": {
			resource: "volumegroupsnapshots",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupSnapshot("ns", "g", Selecting("app", "late")))
			},
			wantMessage: `wait until claim "pending" is bound`,
		},
		"a valid group is admitted": {
			resource: "volumegroupsnapshots",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupSnapshot("ns", "g", Selecting("app", "db")))
			},
		},
		"a group that selects nothing yet is admitted with a warning": {
			resource: "volumegroupsnapshots",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupSnapshot("ns", "g", Selecting("app", "later")))
			},
			wantWarning: "matches no PersistentVolumeClaim",
		},
		"a group that gets its namespace from the request is judged in it": {
			resource: "volumegroupsnapshots",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				r := newReview(t, res, NewGroupSnapshot("", "g", Selecting("app", "late")))
				r.Request.Namespace = "ns"
				return r
			},
			wantMessage: `VolumeGroupSnapshot "ns/g" selects PersistentVolumeClaim "pending"`,
		},
		"a change of a group's source is denied": {
			resource: "volumegroupsnapshots",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupSnapshot("ns", "g", Selecting("app", "db")),
					asUpdate(t, NewGroupSnapshot("ns", "g", Selecting("app", "web"))))
			},
			wantMessage: "cannot change spec.source",
		},
		"a group content with both handle kinds is denied": {
			resource: "volumegroupsnapshotcontents", endpoint: "volumegroupsnapshotcontents",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupContent("gc", WithVolumeHandles("v1"), WithGroupHandles("g", "s1"), GroupBoundTo("ns", "g", "")))
			},
			wantMessage: "sets both spec.source.volumeHandles and spec.source.groupSnapshotHandles",
		},
		"a valid group content is admitted": {
			resource: "volumegroupsnapshotcontents",
			review: func(t *testing.T, res string) *admissionv1.AdmissionReview {
				return newReview(t, res, NewGroupContent("gc", WithVolumeHandles("v1"), GroupBoundTo("ns", "g", "")))
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newTestHandler(t, validation.Options{}, groupWorld()...)
			status, out := postReview(t, h.Endpoint(tc.endpoint), tc.review(t, tc.resource))
			resp := out.Response
			if status != http.StatusOK || resp.UID != testUID {
				t.Fatalf("HTTP %d, UID %q: want 200 and the request's UID", status, resp.UID)
			}
			if want := tc.wantMessage == ""; resp.Allowed != want {
				t.Fatalf("allowed = %v, want %v (result %+v)", resp.Allowed, want, resp.Result)
			}
			if tc.wantMessage != "" {
				if r := resp.Result; r.Code != http.StatusForbidden || !strings.Contains(r.Message, tc.wantMessage) ||
					r.Details == nil || r.Details.Group != "groupsnapshot.storage.k8s.io" {
					t.Errorf("result %+v, want 403 of group groupsnapshot.storage.k8s.io with a message containing %q", r, tc.wantMessage)
				}
			}
			if w := strings.Join(resp.Warnings, "\n"); !strings.Contains(w, tc.wantWarning) {
				t.Errorf("warnings %q do not contain %q", resp.Warnings, tc.wantWarning)
			}
		})
	}
}

// Only v1 of the group kinds is validated; other versions reach the
// webhook as v1 when the configuration's matchPolicy is Equivalent.
func TestGroupKindsOtherVersionsAreRefused(t *testing.T) {
	h := newTestHandler(t, validation.Options{}, groupWorld()...)
	r := newReview(t, "volumegroupsnapshots", NewGroupSnapshot("ns", "g", Selecting("app", "db")))
	r.Request.Resource.Version, r.Request.Kind.Version = "v1beta2", "v1beta2"
	_, out := postReview(t, h.Endpoint(""), r)
	if res := out.Response.Result; out.Response.Allowed || res == nil || res.Code != http.StatusBadRequest ||
		!strings.Contains(res.Message, "only that version is validated") {
		t.Errorf("response %+v, want 400 naming the validated version", out.Response)
	}
}

// The router serves an endpoint per group resource.
func TestRouterServesGroupEndpoints(t *testing.T) {
	h := newTestHandler(t, validation.Options{}, groupWorld()...)
	router := NewRouter(h, prometheus.NewRegistry(), nil)
	for _, res := range []string{"volumegroupsnapshotclasses", "volumegroupsnapshots", "volumegroupsnapshotcontents"} {
		body := marshal(t, newReview(t, res, nil, withOperation(admissionv1.Delete)))
		rec, _ := send(t, router, http.MethodPost, "/validate/"+res, bytes.NewReader(body), "application/json")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"allowed":true`) {
			t.Errorf("/validate/%s: %d %s", res, rec.Code, rec.Body.String())
		}
	}
}
