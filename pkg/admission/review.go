// Package admission serves the validation rules of pkg/validation as a
// Kubernetes validating admission webhook: HTTP and TLS (with certificate
// reload), AdmissionReview decoding, health, readiness and metrics. It owns
// the plumbing only; every verdict comes from pkg/validation.
package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// Review API versions the API server may send. v1beta1 has the same JSON
// shape as v1; only the apiVersion of the answer differs.
const (
	reviewV1      = "admission.k8s.io/v1"
	reviewV1beta1 = "admission.k8s.io/v1beta1"
	reviewKind    = "AdmissionReview"
)

// errBadRequest marks a request the API server would never send: it is
// answered with 400, not with a verdict.
var errBadRequest = errors.New("bad admission request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// DecodeReview parses an AdmissionReview body of version v1 or v1beta1 and
// returns it with the apiVersion to answer in. It never panics, whatever the
// bytes: it is the first thing untrusted input reaches.
func DecodeReview(body []byte) (*admissionv1.AdmissionReview, string, error) {
	if len(body) == 0 {
		return nil, "", badRequest("empty body: expected an AdmissionReview")
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, "", badRequest("body is not a JSON AdmissionReview: %v", err)
	}
	if tm.Kind != reviewKind || (tm.APIVersion != reviewV1 && tm.APIVersion != reviewV1beta1) {
		return nil, "", badRequest("expected kind AdmissionReview of apiVersion %s or %s, got kind %q of apiVersion %q",
			reviewV1, reviewV1beta1, tm.Kind, tm.APIVersion)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, "", badRequest("cannot decode AdmissionReview: %v", err)
	}
	if review.Request == nil {
		return nil, "", badRequest("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, "", badRequest("AdmissionReview request has no uid")
	}
	return &review, tm.APIVersion, nil
}

// resourceInfo ties a resource the webhook validates to its kind and to a
// decoder of its objects.
type resourceInfo struct {
	gvr    schema.GroupVersionResource
	kind   string
	decode func([]byte) (any, error)
}

func decodeAs[T any](raw []byte) (any, error) {
	obj := new(T)
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// resources are the resources with rules, by plural name: the last element
// of the /validate/<resource> path.
var resources = map[string]resourceInfo{
	"volumesnapshotclasses": {
		snapv1.SchemeGroupVersion.WithResource("volumesnapshotclasses"), "VolumeSnapshotClass",
		decodeAs[snapv1.VolumeSnapshotClass]},
	"volumesnapshots": {
		snapv1.SchemeGroupVersion.WithResource("volumesnapshots"), "VolumeSnapshot",
		decodeAs[snapv1.VolumeSnapshot]},
	"volumesnapshotcontents": {
		snapv1.SchemeGroupVersion.WithResource("volumesnapshotcontents"), "VolumeSnapshotContent",
		decodeAs[snapv1.VolumeSnapshotContent]},
	"persistentvolumeclaims": {
		corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "PersistentVolumeClaim",
		decodeAs[corev1.PersistentVolumeClaim]},
	// The group kinds are validated in v1 only, as the snapshot kinds: with
	// matchPolicy Equivalent the API server converts requests made in the
	// other served versions (v1beta1, v1beta2) to v1 before sending them.
	"volumegroupsnapshotclasses": {
		groupv1.SchemeGroupVersion.WithResource("volumegroupsnapshotclasses"), "VolumeGroupSnapshotClass",
		decodeAs[groupv1.VolumeGroupSnapshotClass]},
	"volumegroupsnapshots": {
		groupv1.SchemeGroupVersion.WithResource("volumegroupsnapshots"), "VolumeGroupSnapshot",
		decodeAs[groupv1.VolumeGroupSnapshot]},
	"volumegroupsnapshotcontents": {
		groupv1.SchemeGroupVersion.WithResource("volumegroupsnapshotcontents"), "VolumeGroupSnapshotContent",
		decodeAs[groupv1.VolumeGroupSnapshotContent]},
	// Our own kind, in the one version it is served in.
	"snapshotschedules": {
		v1alpha1.Resource, "SnapshotSchedule",
		decodeAs[v1alpha1.SnapshotSchedule]},
}

// Resources lists the plural names the webhook validates, for registration.
func Resources() []string {
	return []string{"volumesnapshotclasses", "volumesnapshots", "volumesnapshotcontents", "persistentvolumeclaims",
		"volumegroupsnapshotclasses", "volumegroupsnapshots", "volumegroupsnapshotcontents", "snapshotschedules"}
}

// checkKind makes sure the request is about the resource this endpoint
// serves and that resource and kind agree: a mismatch means a wrong
// ValidatingWebhookConfiguration, which should fail loudly, not be waved
// through.
func checkKind(endpoint string, req *admissionv1.AdmissionRequest) (resourceInfo, error) {
	got := req.Resource.Resource
	if endpoint != "" && got != endpoint {
		return resourceInfo{}, badRequest("this endpoint validates %s, the request is for %q; point the webhook rule for %q at /validate/%s",
			endpoint, got, got, got)
	}
	info, ok := resources[got]
	if !ok {
		return resourceInfo{}, badRequest("no rules for resource %q; the webhook validates %v", got, Resources())
	}
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: got}
	if gvr != info.gvr {
		return resourceInfo{}, badRequest("resource %s is not %s: only that version is validated", gvr, info.gvr)
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if want := info.gvr.GroupVersion().WithKind(info.kind); gvk != want {
		return resourceInfo{}, badRequest("kind %s does not match resource %s (want kind %s)", gvk, gvr, want)
	}
	return info, nil
}

// decodeObject decodes a raw object of the request and checks that its own
// apiVersion and kind, when present, are those of the request.
func decodeObject(info resourceInfo, raw []byte, which string) (any, error) {
	if len(raw) == 0 {
		return nil, badRequest("request has no %s", which)
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, badRequest("%s is not a JSON object: %v", which, err)
	}
	want := info.gvr.GroupVersion().WithKind(info.kind)
	if tm.Kind != "" && tm.GroupVersionKind() != want {
		return nil, badRequest("%s is a %s, the request says %s", which, tm.GroupVersionKind(), want)
	}
	obj, err := info.decode(raw)
	if err != nil {
		return nil, badRequest("cannot decode %s as %s: %v", which, info.kind, err)
	}
	return obj, nil
}

// errorResponse answers a request that could not be judged.
func errorResponse(uid types.UID, code int32, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		UID:     uid,
		Allowed: false,
		Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: code, Message: msg,
			Reason: reasonFor(code),
		},
	}
}

func reasonFor(code int32) metav1.StatusReason {
	switch code {
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusRequestEntityTooLarge:
		return metav1.StatusReasonRequestEntityTooLarge
	case http.StatusUnsupportedMediaType:
		return metav1.StatusReasonUnsupportedMediaType
	case http.StatusMethodNotAllowed:
		return metav1.StatusReasonMethodNotAllowed
	case http.StatusRequestTimeout:
		return metav1.StatusReasonTimeout
	case http.StatusTooManyRequests:
		return metav1.StatusReasonTooManyRequests
	}
	return metav1.StatusReasonInternalError
}
