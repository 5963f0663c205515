package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// FuzzDecodeReview: the decoder is the first code untrusted bytes reach.
// It must not panic, and what it accepts must carry a request and a UID.
func FuzzDecodeReview(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":1}}}`))
	f.Add([]byte(`{"kind":"AdmissionReview"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		review, version, err := DecodeReview(body)
		if err != nil {
			return
		}
		if review.Request == nil || review.Request.UID == "" {
			t.Fatalf("accepted a review without request or UID: %s", body)
		}
		if version != reviewV1 && version != reviewV1beta1 {
			t.Fatalf("accepted apiVersion %q", version)
		}
	})
}

// FuzzServe sends arbitrary bodies through the whole handler: every answer
// must be an AdmissionReview with a response, and a decodable request must
// get its UID back, whatever the validators made of the object.
func FuzzServe(f *testing.F) {
	for _, r := range []*admissionv1.AdmissionReview{
		{TypeMeta: reviewTypeMeta(), Request: &admissionv1.AdmissionRequest{
			UID: testUID, Kind: gvkOf("volumesnapshotclasses"), Resource: gvrOf("volumesnapshotclasses"),
			Operation: admissionv1.Create, Object: rawNoT(NewClass("fast", AsDefault())),
		}},
		{TypeMeta: reviewTypeMeta(), Request: &admissionv1.AdmissionRequest{
			UID: testUID, Kind: gvkOf("volumesnapshotcontents"), Resource: gvrOf("volumesnapshotcontents"),
			Operation: admissionv1.Update, Object: rawNoT(NewContent("c", WithVolumeHandle("v"))),
			OldObject: rawNoT(NewContent("c", WithSnapshotHandle("s"))),
		}},
		{TypeMeta: reviewTypeMeta(), Request: &admissionv1.AdmissionRequest{
			UID: testUID, Kind: gvkOf("persistentvolumeclaims"), Resource: gvrOf("persistentvolumeclaims"),
			Operation: admissionv1.Create, Object: rawNoT(NewPVC("ns", "p", RestoresFrom("s"))),
		}},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	l := &validation.StaticLookup{}
	if err := l.Add(NewClass("standard", AsDefault()), NewSnapshot("ns", "s", FromPVC("d"), Ready("1Gi", "c"))); err != nil {
		f.Fatal(err)
	}
	h := NewHandler(func(_ context.Context) validation.Lookup { return l }, validation.Options{}, 1<<20, nil).Endpoint("")
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		// Logging every failed judgement to stderr throttles the fuzzer.
		req = req.WithContext(klog.NewContext(req.Context(), logr.Discard()))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer is not a review with a response: %v\n%s", err, rec.Body.String())
		}
		if review, _, err := DecodeReview(body); err == nil {
			if rec.Code != http.StatusOK || out.Response.UID != review.Request.UID {
				t.Fatalf("status %d, UID %q: want 200 and %q", rec.Code, out.Response.UID, review.Request.UID)
			}
			if out.Response.Result != nil && out.Response.Result.Code == http.StatusInternalServerError {
				t.Fatalf("internal error (a panic?): %s", out.Response.Result.Message)
			}
		}
	})
}
