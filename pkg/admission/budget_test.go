package admission

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
	. "github.com/snapkeeper/snapkeeper/pkg/validation/validationtest"
)

// Large bodies cannot take the webhook past its memory: a body that would
// take the bytes held at once past the bound gets 429 with Retry-After,
// while an ordinary review (within freeBodyBytes) is still judged, and the
// bytes come back once each request is answered.
func TestBodyBudget(t *testing.T) {
	small := marshal(t, newReview(t, "volumesnapshotclasses", NewClass("fast")))
	large := padded(small, 600<<10)
	const limit = 1 << 20
	tests := []struct {
		name       string
		heldBefore int64 // bytes other requests hold
		body       []byte
		wantStatus int
	}{
		{name: "a large review is judged while the budget has room", body: large, wantStatus: http.StatusOK},
		{name: "a large review is refused while others hold the budget", heldBefore: limit - 100<<10, body: large, wantStatus: http.StatusTooManyRequests},
		{name: "an ordinary review is judged while others hold all of the budget", heldBefore: limit, body: small, wantStatus: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandler(t, validation.Options{})
			h.budget = newBodyBudget(limit)
			if !h.budget.take(tc.heldBefore) {
				t.Fatal("cannot hold the budget")
			}
			rec, out := send(t, h.Endpoint(""), http.MethodPost, "/validate", bytes.NewReader(tc.body), "application/json")
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body.String())
			}
			if tc.wantStatus == http.StatusTooManyRequests {
				want := "request bodies being read or judged take the webhook's limit of 1 MiB: retry, or send a review of at most 64 KiB, which is always read"
				if r := out.Response.Result; r == nil || r.Message != want || r.Reason != "TooManyRequests" || rec.Header().Get("Retry-After") != "1" {
					t.Errorf("result %+v, Retry-After %q; want 429 %q and Retry-After 1", r, rec.Header().Get("Retry-After"), want)
				}
			}
			if left := h.budget.left.Load(); left != limit-tc.heldBefore {
				t.Errorf("after the answer %d bytes of the budget are left, want %d: the request kept some", left, limit-tc.heldBefore)
			}
		})
	}
}
