package admission

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// deadlineReader fails as a connection's body does once the server's
// readTimeout has passed.
type deadlineReader struct{}

func (deadlineReader) Read([]byte) (int, error) {
	return 0, fmt.Errorf("read tcp 127.0.0.1:1->127.0.0.1:2: %w", os.ErrDeadlineExceeded)
}

// A client that trickles its body past readTimeout (the slow-body attack
// of test/faults TestWebhookAbuse) gets a 408 that names the limit and the
// fix, not the transport's error string.
func TestBodyPastReadTimeout(t *testing.T) {
	h := newTestHandler(t, validation.Options{})
	body := io.MultiReader(strings.NewReader(`{"apiVersion":"admission.k8s.io/v1",`), deadlineReader{})
	req := httptest.NewRequest(http.MethodPost, "/validate", body)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.Endpoint("").ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", rec.Code)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Result == nil {
		t.Fatalf("answer is not an AdmissionReview with a result: %v\n%s", err, rec.Body.String())
	}
	want := "body not received within 15s of the request's start: send the whole AdmissionReview at once"
	if r := out.Response.Result; r.Code != http.StatusRequestTimeout || r.Message != want || r.Reason != "Timeout" {
		t.Errorf("result %+v, want 408 Timeout %q", r, want)
	}
}
