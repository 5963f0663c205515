package main

import (
	"encoding/json"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fake API servers of these tests answer as kube-apiserver does on the
// wire: JSON objects, and failures as a Status.

// apiStatus is a failure as the API server answers it.
func apiStatus(code int32, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}
}

// answerJSON answers a request with code and obj as JSON.
func answerJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

// readBody reads a request's body and, when into is set, decodes it there.
func readBody(r *http.Request, into any) []byte {
	body, _ := io.ReadAll(r.Body)
	if into != nil {
		_ = json.Unmarshal(body, into)
	}
	return body
}
