package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// malformedCase is a request the API server never sends, and the clear
// refusal it must get.
type malformedCase struct {
	name        string
	method      string // POST when empty
	path        string // /validate/volumesnapshotclasses when empty
	contentType string // application/json when empty, none when "-"
	body        string
	wantStatus  int    // HTTP status
	wantCode    int32  // the review's result code, when the answer is a review with a request UID
	wantMessage string // in the review's result message, or the plain answer
}

const (
	reviewHead = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`
	classGVKR  = `"kind":{"group":"snapshot.storage.k8s.io","version":"v1","kind":"VolumeSnapshotClass"},` +
		`"resource":{"group":"snapshot.storage.k8s.io","version":"v1","resource":"volumesnapshotclasses"}`
	classObj = `{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotClass","metadata":{"name":"m"},"driver":"d.example.com","deletionPolicy":"Delete"}`
)

func malformedCases() []malformedCase {
	valid := reviewHead + `{"uid":"u1",` + classGVKR + `,"operation":"CREATE","name":"m","object":` + classObj + `}}`
	return []malformedCase{
		{name: "a body that is not JSON", body: "kind: AdmissionReview\n",
			wantStatus: 400, wantMessage: "body is not a JSON AdmissionReview"},
		{name: "an empty body", body: "",
			wantStatus: 400, wantMessage: "empty body: expected an AdmissionReview"},
		{name: "a wrong content type", contentType: "application/yaml", body: valid,
			wantStatus: 415, wantMessage: `content type "application/yaml" not supported: expected application/json`},
		{name: "no content type", contentType: "-", body: valid,
			wantStatus: 415, wantMessage: `content type "" not supported: expected application/json`},
		{name: "a GET", method: http.MethodGet,
			wantStatus: 405, wantMessage: "method GET not allowed: send AdmissionReviews with POST"},
		{name: "a review of an unknown apiVersion", body: strings.Replace(valid, "admission.k8s.io/v1", "admission.k8s.io/v2", 1),
			wantStatus: 400, wantMessage: `expected kind AdmissionReview of apiVersion admission.k8s.io/v1 or admission.k8s.io/v1beta1, got kind "AdmissionReview" of apiVersion "admission.k8s.io/v2"`},
		{name: "JSON of another kind", body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`,
			wantStatus: 400, wantMessage: `got kind "Pod" of apiVersion "v1"`},
		{name: "a review without request", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
			wantStatus: 400, wantMessage: "AdmissionReview has no request"},
		{name: "a review without uid", body: strings.Replace(valid, `"uid":"u1",`, "", 1),
			wantStatus: 400, wantMessage: "AdmissionReview request has no uid"},
		{name: "a request for another resource on this endpoint",
			body:       strings.ReplaceAll(valid, "volumesnapshotclasses", "volumesnapshots"),
			wantStatus: 200, wantCode: 400, wantMessage: `this endpoint validates volumesnapshotclasses, the request is for "volumesnapshots"`},
		{name: "a request whose kind does not match its resource",
			body:       strings.Replace(valid, `"kind":"VolumeSnapshotClass"},`, `"kind":"VolumeSnapshot"},`, 1),
			wantStatus: 200, wantCode: 400, wantMessage: "does not match resource"},
		{name: "an object of another kind than the request",
			body:       strings.Replace(valid, classObj, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"m"}}`, 1),
			wantStatus: 200, wantCode: 400, wantMessage: "object is a /v1, Kind=Pod, the request says snapshot.storage.k8s.io/v1, Kind=VolumeSnapshotClass"},
		{name: "an object that is not an object",
			body:       strings.Replace(valid, classObj, `[1,2,3]`, 1),
			wantStatus: 200, wantCode: 400, wantMessage: "object is not a JSON object"},
		{name: "an UPDATE without oldObject",
			body:       strings.Replace(valid, `"CREATE"`, `"UPDATE"`, 1),
			wantStatus: 200, wantCode: 400, wantMessage: `UPDATE of VolumeSnapshotClass "m" without oldObject`},
		{name: "an unknown path", path: "/validate/pods", body: valid,
			wantStatus: 404, wantMessage: "404 page not found"},
	}
}

// malformedResult is the answer to one malformed request.
type malformedResult struct {
	c      malformedCase
	status int
	code   int32
	msg    string
	err    error
}

// malformed sends each malformed case once and checks its refusal.
func (h *hostile) malformed(ctx context.Context, t *testing.T) []malformedResult {
	t.Helper()
	var out []malformedResult
	for _, c := range malformedCases() {
		r := malformedResult{c: c}
		r.status, r.code, r.msg, r.err = h.send(ctx, c)
		if r.err == nil && (r.status != c.wantStatus || r.code != c.wantCode || !strings.Contains(r.msg, c.wantMessage)) {
			r.err = fmt.Errorf("answered %d (review code %d) %q; want %d (review code %d) containing %q",
				r.status, r.code, r.msg, c.wantStatus, c.wantCode, c.wantMessage)
		}
		if r.err != nil {
			t.Errorf("%s: %v", c.name, r.err)
		}
		out = append(out, r)
	}
	return out
}

// send sends c and returns the HTTP status, the review's result code when
// the answer carries a request UID (a verdict-level refusal), and the
// message.
func (h *hostile) send(ctx context.Context, c malformedCase) (int, int32, string, error) {
	method, path := c.method, c.path
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = "/validate/volumesnapshotclasses"
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+h.addr+path, bytes.NewReader([]byte(c.body)))
	if err != nil {
		return 0, 0, "", err
	}
	switch c.contentType {
	case "":
		req.Header.Set("Content-Type", "application/json")
	case "-":
	default:
		req.Header.Set("Content-Type", c.contentType)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, 0, "", err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	msg := answerMessage(resp)
	var code int32
	if resp.StatusCode == http.StatusOK {
		code = reviewCode(b)
	}
	return resp.StatusCode, code, msg, nil
}

// reviewCode is the result code of an AdmissionReview answer, 0 if none.
func reviewCode(b []byte) int32 {
	var r admissionv1.AdmissionReview
	if json.Unmarshal(b, &r) != nil || r.Response == nil || r.Response.Result == nil {
		return 0
	}
	return r.Response.Result.Code
}

// reportMalformed logs each case's refusal once.
func reportMalformed(t *testing.T, results []malformedResult) {
	t.Helper()
	seen := map[string]bool{}
	failed := 0
	for _, r := range results {
		if r.err != nil {
			failed++
		}
		if seen[r.c.name] {
			continue
		}
		seen[r.c.name] = true
		code := ""
		if r.code != 0 {
			code = fmt.Sprintf(" (review result %d)", r.code)
		}
		t.Logf("malformed: %-50s -> %d%s %q", r.c.name, r.status, code, r.msg)
	}
	t.Logf("malformed: %d requests (%d cases), %d not refused as wanted", len(results), len(seen), failed)
}
