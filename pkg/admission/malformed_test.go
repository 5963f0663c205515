package admission

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// Requests the API server never sends must still get a clear answer, never
// a panic or a hang: the endpoint is reachable by anything in the cluster.
func TestMalformedRequests(t *testing.T) {
	valid := marshal(t, newReview(t, "volumesnapshotclasses", NewClass("fast")))
	tests := map[string]struct {
		method      string
		contentType string
		body        []byte
		wantStatus  int
		wantMessage string
	}{
		"an empty body": {
			body: nil, wantStatus: http.StatusBadRequest, wantMessage: "empty body",
		},
		"a body that is not JSON": {
			body: []byte("kind: AdmissionReview\n"), wantStatus: http.StatusBadRequest, wantMessage: "not a JSON AdmissionReview",
		},
		"JSON that is not a review": {
			body: []byte(`{"apiVersion":"v1","kind":"Pod"}`), wantStatus: http.StatusBadRequest,
			wantMessage: `expected kind AdmissionReview of apiVersion admission.k8s.io/v1 or admission.k8s.io/v1beta1, got kind "Pod"`,
		},
		"a review without request": {
			body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), wantStatus: http.StatusBadRequest,
			wantMessage: "has no request",
		},
		"a review without uid": {
			body:       []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`),
			wantStatus: http.StatusBadRequest, wantMessage: "has no uid",
		},
		"a review whose request has the wrong shape": {
			body:       []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[1,2]}`),
			wantStatus: http.StatusBadRequest, wantMessage: "cannot decode AdmissionReview",
		},
		"an oversized body": {
			body:       padded(valid, 2<<20),
			wantStatus: http.StatusRequestEntityTooLarge, wantMessage: "larger than the limit",
		},
		"a wrong content type": {
			contentType: "application/yaml", body: valid,
			wantStatus: http.StatusUnsupportedMediaType, wantMessage: `content type "application/yaml" not supported`,
		},
		"no content type": {
			contentType: "-", body: valid,
			wantStatus: http.StatusUnsupportedMediaType, wantMessage: "expected application/json",
		},
		"a GET": {
			method: http.MethodGet, wantStatus: http.StatusMethodNotAllowed, wantMessage: "send AdmissionReviews with POST",
		},
	}
	h := newTestHandler(t, validation.Options{})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			contentType := tc.contentType
			switch contentType {
			case "":
				contentType = "application/json; charset=utf-8"
			case "-":
				contentType = ""
			}
			rec, out := send(t, h.Endpoint(""), method, "/validate", bytes.NewReader(tc.body), contentType)
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if out.Response.Result == nil {
				t.Fatalf("answer has no result: %s", rec.Body.String())
			}
			if out.Response.Allowed || !strings.Contains(out.Response.Result.Message, tc.wantMessage) {
				t.Errorf("response %+v, want a refusal containing %q", out.Response.Result, tc.wantMessage)
			}
		})
	}
}
