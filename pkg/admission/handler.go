package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// DefaultMaxRequestBytes caps a review body. The API server limits one
// object to about 3 MiB and a review of an UPDATE carries two of them.
const DefaultMaxRequestBytes = 7 << 20

// LookupFactory returns the Lookup for one request, bound to its context
// (the fresh read of classes must stop when the API server gives up).
type LookupFactory func(ctx context.Context) validation.Lookup

// Handler answers AdmissionReviews with the verdicts of pkg/validation.
type Handler struct {
	lookups  LookupFactory
	options  validation.Options
	maxBytes int64
	budget   *bodyBudget
	metrics  *Metrics
	defaults *defaultClaims
}

// NewHandler builds a Handler. maxBytes <= 0 means DefaultMaxRequestBytes;
// metrics may be nil.
func NewHandler(lookups LookupFactory, opts validation.Options, maxBytes int64, metrics *Metrics) *Handler {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRequestBytes
	}
	return &Handler{lookups: lookups, options: opts, maxBytes: maxBytes, budget: newBodyBudget(max(DefaultInflightBodyBytes, maxBytes)),
		metrics: metrics, defaults: newDefaultClaims(0)}
}

// Endpoint returns the handler of /validate/<resource>; resource "" gives
// the generic /validate, which dispatches on the request's resource.
func (h *Handler) Endpoint(resource string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, resource) })
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, endpoint string) {
	start := time.Now()
	label := outcome{resource: resourceLabel(endpoint), operation: "unknown", verdict: verdictError}
	defer func() { h.metrics.observe(label, time.Since(start)) }()

	body, release, status, err := h.readBody(w, r)
	defer release() // the body and what is decoded from it live until the answer
	if err != nil {
		writeReview(w, reviewV1, status, errorResponse("", int32(status), err.Error()))
		return
	}
	review, version, err := DecodeReview(body)
	if err != nil {
		writeReview(w, reviewV1, http.StatusBadRequest, errorResponse("", http.StatusBadRequest, err.Error()))
		return
	}
	req := review.Request
	label.resource, label.operation = resourceLabel(req.Resource.Resource), operationLabel(req.Operation)
	resp := h.judge(r.Context(), endpoint, req)
	label.verdict = verdictOf(resp)
	writeReview(w, version, http.StatusOK, resp)
}

// readBody enforces the transport rules: POST, application/json, a body of
// at most maxBytes, within the bytes all requests may hold at once. It
// returns the HTTP status to answer with on error, and release, to call
// once the request is answered.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), status int, err error) {
	release = func() {}
	if status, err := checkPost(r, "AdmissionReviews", h.maxBytes); err != nil {
		return nil, release, status, err
	}
	counted := &budgetedBody{r: http.MaxBytesReader(w, r.Body, h.maxBytes), b: h.budget}
	body, err = io.ReadAll(counted)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		counted.release()
		return nil, release, http.StatusRequestEntityTooLarge, fmt.Errorf("body is larger than the limit of %d bytes", h.maxBytes)
	case errors.Is(err, errBodyBudget):
		counted.release()
		w.Header().Set("Retry-After", "1")
		return nil, release, http.StatusTooManyRequests, fmt.Errorf("request bodies being read or judged take the webhook's limit of %d MiB: retry, or send a review of at most %d KiB, which is always read",
			h.budget.limit>>20, freeBodyBytes>>10)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// A client trickling its body runs into the server's readTimeout.
		counted.release()
		return nil, release, http.StatusRequestTimeout, fmt.Errorf("body not received within %v of the request's start: send the whole AdmissionReview at once", readTimeout)
	case err != nil:
		counted.release()
		return nil, release, http.StatusBadRequest, fmt.Errorf("reading body: %w", err)
	case len(body) == 0:
		return nil, release, http.StatusBadRequest, errors.New("empty body: expected an AdmissionReview")
	}
	return body, counted.release, 0, nil
}

// checkPost enforces what every review endpoint takes: POST of
// application/json, announced as at most maxBytes.
func checkPost(r *http.Request, what string, maxBytes int64) (status int, err error) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed: send %s with POST", r.Method, what)
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, fmt.Errorf("content type %q not supported: expected application/json", ct)
	}
	if r.ContentLength > maxBytes {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes is larger than the limit of %d", r.ContentLength, maxBytes)
	}
	return 0, nil
}

// judge validates one request. A panic in a rule is recovered into an
// error response that still carries the request UID: the API server then
// applies the webhook's failurePolicy instead of seeing a broken connection.
func (h *Handler) judge(ctx context.Context, endpoint string, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	log := klog.FromContext(ctx).WithValues("uid", req.UID, "resource", req.Resource.Resource,
		"namespace", req.Namespace, "name", req.Name, "operation", req.Operation)
	defer func() {
		if p := recover(); p != nil {
			log.Error(nil, "Panic while validating", "panic", p, "stack", string(debug.Stack()))
			resp = errorResponse(req.UID, http.StatusInternalServerError,
				fmt.Sprintf("internal error while validating %s %q: %v; please report this bug", req.Kind.Kind, req.Name, p))
		}
	}()
	resp = h.validate(klog.NewContext(ctx, log), endpoint, req)
	resp.UID = req.UID
	switch v := verdictOf(resp); v {
	case verdictDenied:
		log.V(1).Info("Denied", "message", resp.Result.Message)
	case verdictError:
		log.Info("Could not judge request", "message", resp.Result.Message)
	default:
		log.V(3).Info("Admitted", "warnings", len(resp.Warnings))
	}
	return resp
}

func (h *Handler) validate(ctx context.Context, endpoint string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	// Deletes and status writes are never judged: blocking them could leave
	// an object stuck in Terminating or a controller unable to report.
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	info, err := checkKind(endpoint, req)
	if err != nil {
		return errorResponse(req.UID, http.StatusBadRequest, err.Error())
	}
	obj, err := decodeObject(info, req.Object.Raw, "object")
	if err != nil {
		return errorResponse(req.UID, http.StatusBadRequest, err.Error())
	}
	var old any
	if req.Operation == admissionv1.Update {
		if len(req.OldObject.Raw) == 0 {
			return errorResponse(req.UID, http.StatusBadRequest,
				fmt.Sprintf("UPDATE of %s %q without oldObject: an update is judged by what it changes", info.kind, req.Name))
		}
		if old, err = decodeObject(info, req.OldObject.Raw, "oldObject"); err != nil {
			return errorResponse(req.UID, http.StatusBadRequest, err.Error())
		}
	}
	inheritNamespace(obj, req.Namespace)
	inheritNamespace(old, req.Namespace)
	var (
		errs     field.ErrorList
		warnings []string
	)
	dryRun := req.DryRun != nil && *req.DryRun
	h.defaults.judge(obj, dryRun, h.lookups(ctx), func(l validation.Lookup) bool {
		v := validation.Validator{Lookup: l, Options: h.options}
		errs, warnings, err = v.Validate(validation.Operation(req.Operation), obj, old)
		return err == nil && len(errs) == 0
	})
	if err != nil {
		return errorResponse(req.UID, http.StatusInternalServerError, err.Error())
	}
	if len(errs) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
	}
	return denied(req, info, errs, warnings)
}

// inheritNamespace fills in the namespace of the request when the object
// does not carry one: at the mutating stage (where the claim rules run, see
// docs/webhook.md) the API server has not yet copied it into the object.
func inheritNamespace(obj any, namespace string) {
	if m, ok := obj.(metav1.Object); ok && m.GetNamespace() == "" {
		m.SetNamespace(namespace)
	}
}

// denied answers 403 Forbidden: kubectl then prints our message as it is,
// after the API server's "admission webhook ... denied the request: ".
// The causes carry the same errors for programs.
func denied(req *admissionv1.AdmissionRequest, info resourceInfo, errs field.ErrorList, warnings []string) *admissionv1.AdmissionResponse {
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		causes = append(causes, metav1.StatusCause{
			Type: metav1.CauseType(e.Type), Message: e.Detail, Field: e.Field,
		})
	}
	return &admissionv1.AdmissionResponse{
		Allowed:  false,
		Warnings: warnings,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: validation.Message(errs),
			Details: &metav1.StatusDetails{
				Name: req.Name, Group: info.gvr.Group, Kind: info.kind, Causes: causes,
			},
		},
	}
}

// writeReview sends a review with resp, in the apiVersion of the request.
func writeReview(w http.ResponseWriter, apiVersion string, status int, resp *admissionv1.AdmissionResponse) {
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: reviewKind},
		Response: resp,
	}
	body, err := json.Marshal(out)
	if err != nil {
		// Unreachable with these types; answer in plain text rather than
		// with a half-written body.
		http.Error(w, "cannot encode AdmissionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body) // the API server is gone if this fails; nothing to do
}
