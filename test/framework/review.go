package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ReviewClass sends the webhook serving at addr (HTTPS, through client)
// the AdmissionReview the API server sends for the create of class, with
// request UID uid, and returns the webhook's response. An answer that is
// not an AdmissionReview with a response is an error.
func ReviewClass(ctx context.Context, client *http.Client, addr string, uid types.UID, class *snapv1.VolumeSnapshotClass) (*admissionv1.AdmissionResponse, error) {
	obj, err := json.Marshal(class)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uid,
			Kind:      metav1.GroupVersionKind{Group: snapv1.GroupName, Version: "v1", Kind: "VolumeSnapshotClass"},
			Resource:  metav1.GroupVersionResource{Group: snapv1.GroupName, Version: "v1", Resource: "volumesnapshotclasses"},
			Name:      class.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: obj},
		},
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/validate/volumesnapshotclasses", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("review of %s: %w", class.Name, err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("review of %s: status %s, answer not a review: %v", class.Name, resp.Status, err)
	}
	return out.Response, nil
}
