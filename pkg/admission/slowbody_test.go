package admission

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

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
	rec, out := send(t, h.Endpoint(""), http.MethodPost, "/validate", body, "application/json")
	if rec.Code != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", rec.Code)
	}
	if out.Response.Result == nil {
		t.Fatalf("answer has no result: %s", rec.Body.String())
	}
	want := "body not received within 15s of the request's start: send the whole AdmissionReview at once"
	if r := out.Response.Result; r.Code != http.StatusRequestTimeout || r.Message != want || r.Reason != "Timeout" {
		t.Errorf("result %+v, want 408 Timeout %q", r, want)
	}
}
