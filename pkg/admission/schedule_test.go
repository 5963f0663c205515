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

// scheduleWorld is groupWorld with the default VolumeSnapshotClass of
// DefaultDriver.
func scheduleWorld() []any {
	return append(groupWorld(), NewClass("standard", AsDefault()))
}

// SnapshotSchedules are routed to their rules, through their own endpoint
// and through the generic /validate.
func TestHandlerRoutesSchedules(t *testing.T) {
	tests := map[string]struct {
		endpoint    string
		review      func(t *testing.T) *admissionv1.AdmissionReview
		wantMessage string // "" means admitted
		wantField   string
		wantWarning string
	}{
		"a valid schedule is admitted on its endpoint": {
			endpoint: "snapshotschedules",
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "db")))
			},
		},
		"a cron line that does not parse is denied": {
			endpoint: "snapshotschedules",
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "db"), Cron("every day")))
			},
			wantMessage: `SnapshotSchedule "ns/nightly" has an invalid spec.schedule: "every day"`,
			wantField:   "spec.schedule",
		},
		"a class that does not exist is denied through the generic endpoint": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "db"), WithClass("fast")))
			},
			wantMessage: `names VolumeSnapshotClass "fast" in spec.snapshotTemplate.volumeSnapshotClassName, which does not exist`,
			wantField:   "spec.snapshotTemplate.volumeSnapshotClassName",
		},
		"group mode over claims of two drivers is denied": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "mixed"), InGroupMode("-")))
			},
			wantMessage: "selects volumes of 2 CSI drivers",
			wantField:   "spec.claimSelector",
		},
		"a schedule that selects no claim yet is admitted with a warning": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "later")))
			},
			wantWarning: `matches no PersistentVolumeClaim in namespace "ns" yet`,
		},
		"a schedule that gets its namespace from the request is judged in it": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				r := newReview(t, "snapshotschedules", NewSchedule("", "nightly", Selecting("app", "mixed"), InGroupMode("-")))
				r.Request.Namespace = "ns"
				return r
			},
			wantMessage: `SnapshotSchedule "ns/nightly" is in group mode`,
			wantField:   "spec.claimSelector",
		},
		"an update is judged by the rules of a create": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "db"), InTimeZone("Mars/Olympus")),
					asUpdate(t, NewSchedule("ns", "nightly", Selecting("app", "db"))))
			},
			wantMessage: `has an invalid spec.timeZone: "Mars/Olympus"`,
			wantField:   "spec.timeZone",
		},
		"a status write is never judged": {
			review: func(t *testing.T) *admissionv1.AdmissionReview {
				return newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Cron("every day")), withSubResource("status"))
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newTestHandler(t, validation.Options{}, scheduleWorld()...)
			status, out := postReview(t, h.Endpoint(tc.endpoint), tc.review(t))
			resp := out.Response
			if status != http.StatusOK || resp.UID != testUID {
				t.Fatalf("HTTP %d, UID %q: want 200 and the request's UID", status, resp.UID)
			}
			if want := tc.wantMessage == ""; resp.Allowed != want {
				t.Fatalf("allowed = %v, want %v (result %+v)", resp.Allowed, want, resp.Result)
			}
			if tc.wantMessage != "" {
				r := resp.Result
				if r.Code != http.StatusForbidden || !strings.Contains(r.Message, tc.wantMessage) ||
					r.Details == nil || r.Details.Group != "snapkeeper.io" || r.Details.Kind != "SnapshotSchedule" {
					t.Fatalf("result %+v, want 403 of kind snapkeeper.io SnapshotSchedule with a message containing %q", r, tc.wantMessage)
				}
				if c := r.Details.Causes; len(c) == 0 || c[0].Field != tc.wantField {
					t.Errorf("causes %+v, want the first on field %s", c, tc.wantField)
				}
			}
			if w := strings.Join(resp.Warnings, "\n"); !strings.Contains(w, tc.wantWarning) {
				t.Errorf("warnings %q do not contain %q", resp.Warnings, tc.wantWarning)
			}
		})
	}
}

// Only v1alpha1 of snapshotschedules is validated, and only under its own
// group: a request for another group's resource of that name is refused.
func TestSchedulesOfAnotherVersionOrGroupAreRefused(t *testing.T) {
	h := newTestHandler(t, validation.Options{}, scheduleWorld()...)
	for name, change := range map[string]func(*admissionv1.AdmissionReview){
		"version": func(r *admissionv1.AdmissionReview) { r.Request.Resource.Version, r.Request.Kind.Version = "v1", "v1" },
		"group": func(r *admissionv1.AdmissionReview) {
			r.Request.Resource.Group, r.Request.Kind.Group = "example.com", "example.com"
		},
	} {
		r := newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Selecting("app", "db")))
		change(r)
		_, out := postReview(t, h.Endpoint(""), r)
		if res := out.Response.Result; out.Response.Allowed || res == nil || res.Code != http.StatusBadRequest ||
			!strings.Contains(res.Message, "only that version is validated") {
			t.Errorf("%s: response %+v, want 400 naming the validated version", name, out.Response)
		}
	}
}

// The router serves /validate/snapshotschedules.
func TestRouterServesTheScheduleEndpoint(t *testing.T) {
	h := newTestHandler(t, validation.Options{}, scheduleWorld()...)
	router := NewRouter(h, prometheus.NewRegistry(), nil)
	body := marshal(t, newReview(t, "snapshotschedules", NewSchedule("ns", "nightly", Cron("every day"))))
	rec, _ := send(t, router, http.MethodPost, "/validate/snapshotschedules", bytes.NewReader(body), "application/json")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"allowed":false`) ||
		!strings.Contains(rec.Body.String(), "spec.schedule") {
		t.Errorf("/validate/snapshotschedules: %d %s", rec.Code, rec.Body.String())
	}
}
