package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/snapkeeper/snapkeeper/pkg/conversion"
)

// The CRD conversion review the API server sends (apiextensions.k8s.io/v1;
// the CRDs register only that version). Declared here rather than imported
// to keep apiextensions-apiserver out of the module.
const (
	conversionReviewV1   = "apiextensions.k8s.io/v1"
	conversionReviewKind = "ConversionReview"
)

type conversionReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *conversionRequest  `json:"request,omitempty"`
	Response        *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               types.UID              `json:"uid"`
	DesiredAPIVersion string                 `json:"desiredAPIVersion"`
	Objects           []runtime.RawExtension `json:"objects"`
}

type conversionResponse struct {
	UID              types.UID              `json:"uid"`
	ConvertedObjects []runtime.RawExtension `json:"convertedObjects"`
	Result           metav1.Status          `json:"result"`
}

// DefaultMaxConversionBytes caps a conversion review: the API server sends
// a whole LIST read at another version in one review.
const DefaultMaxConversionBytes = 256 << 20

// Converter serves /convert: the CRD conversion webhook of the group
// snapshot kinds (pkg/conversion).
type Converter struct {
	members  conversion.Members
	maxBytes int64
	metrics  *Metrics
}

// NewConverter builds a Converter; members may be nil (fields a v1beta1
// object lacks are then only taken from its annotation), maxBytes <= 0
// means DefaultMaxConversionBytes, metrics may be nil.
func NewConverter(members conversion.Members, maxBytes int64, metrics *Metrics) *Converter {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxConversionBytes
	}
	return &Converter{members: members, maxBytes: maxBytes, metrics: metrics}
}

func (c *Converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	result := verdictError
	defer func() {
		c.metrics.observe(outcome{resource: "convert", operation: "convert", verdict: result}, time.Since(start))
	}()
	if status, err := checkPost(r, "ConversionReviews", c.maxBytes); err != nil {
		writeConversion(w, status, &conversionResponse{Result: failure(err.Error())})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.maxBytes))
	if err != nil {
		status, msg := http.StatusBadRequest, "reading body: "+err.Error()
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than the limit of %d bytes", c.maxBytes)
		}
		writeConversion(w, status, &conversionResponse{Result: failure(msg)})
		return
	}
	req, err := decodeConversion(body)
	if err != nil {
		writeConversion(w, http.StatusBadRequest, &conversionResponse{Result: failure(err.Error())})
		return
	}
	resp := c.convert(req)
	if resp.Result.Status == metav1.StatusSuccess {
		result = verdictAllowed
	} else {
		klog.FromContext(r.Context()).Info("Conversion failed", "uid", req.UID, "desiredAPIVersion", req.DesiredAPIVersion, "message", resp.Result.Message)
	}
	writeConversion(w, http.StatusOK, resp)
}

// convert converts every object, or none: one failure fails the review, as
// the API server requires.
func (c *Converter) convert(req *conversionRequest) *conversionResponse {
	resp := &conversionResponse{UID: req.UID, ConvertedObjects: make([]runtime.RawExtension, 0, len(req.Objects))}
	for i, raw := range req.Objects {
		obj, err := conversion.Decode(raw.Raw)
		if err != nil {
			return &conversionResponse{UID: req.UID, Result: failure(fmt.Sprintf("objects[%d]: %v", i, err))}
		}
		out, err := conversion.Convert(obj, req.DesiredAPIVersion, c.members)
		c.metrics.converted(obj, req.DesiredAPIVersion, err)
		if err != nil {
			return &conversionResponse{UID: req.UID, Result: failure(fmt.Sprintf("objects[%d]: %v", i, err))}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return &conversionResponse{UID: req.UID, Result: failure(fmt.Sprintf("objects[%d]: encoding: %v", i, err))}
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// decodeConversion parses a ConversionReview of apiextensions.k8s.io/v1
// with a request; it never panics, whatever the bytes.
func decodeConversion(body []byte) (*conversionRequest, error) {
	var review conversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("body is not a JSON ConversionReview: %v", err)
	}
	if review.Kind != conversionReviewKind || review.APIVersion != conversionReviewV1 {
		return nil, fmt.Errorf("expected kind %s of apiVersion %s, got kind %q of apiVersion %q: list only %s in the CRD's conversionReviewVersions",
			conversionReviewKind, conversionReviewV1, review.Kind, review.APIVersion, strings.TrimPrefix(conversionReviewV1, "apiextensions.k8s.io/"))
	}
	if review.Request == nil || review.Request.UID == "" {
		return nil, errors.New("ConversionReview has no request, or its request no uid")
	}
	return review.Request, nil
}

func failure(msg string) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Message: msg}
}

func writeConversion(w http.ResponseWriter, status int, resp *conversionResponse) {
	body, err := json.Marshal(conversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: conversionReviewV1, Kind: conversionReviewKind},
		Response: resp,
	})
	if err != nil {
		http.Error(w, "cannot encode ConversionReview: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
