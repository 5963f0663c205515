package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/pkg/validation"
)

// The invalid class breaks exactly the rule whose text selftest looks for.
func TestSelftestClassBreaksTheRule(t *testing.T) {
	errs, _ := validation.Validator{Lookup: &validation.StaticLookup{}}.Class(validation.Create, invalidClass("c"), nil)
	if len(errs) != 1 || !strings.Contains(validation.Message(errs), selftestRule) {
		t.Fatalf("errors %v: want one, saying %q", errs, selftestRule)
	}
}

// webhookStatus is what the API server makes of a webhook's denial
// (k8s.io/apiserver's webhook ToStatusErr): our code and reason, the
// message behind "admission webhook NAME denied the request: ".
func webhookStatus(name string, code int32, reason metav1.StatusReason, msg string) *metav1.Status {
	return apiStatus(code, reason, fmt.Sprintf("admission webhook %q denied the request: %s", name, msg))
}

// fakeAPI answers the create of a VolumeSnapshotClass with status (nil:
// created), as an API server does on the wire, and records the request.
type fakeAPI struct {
	status *metav1.Status
	abort  bool // drop the connection instead of answering
	dryRun []string
	sent   snapv1.VolumeSnapshotClass
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses" {
		http.Error(w, r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	f.dryRun = r.URL.Query()["dryRun"]
	body := readBody(r, &f.sent)
	if f.abort {
		panic(http.ErrAbortHandler)
	}
	if f.status == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
		return
	}
	answerJSON(w, int(f.status.Code), f.status)
}

func TestSelftestOutcomes(t *testing.T) {
	errs, _ := validation.Validator{Lookup: &validation.StaticLookup{}}.Class(validation.Create, invalidClass("c"), nil)
	rule := validation.Message(errs)
	forbidden := func(msg string) *metav1.Status { return apiStatus(403, metav1.StatusReasonForbidden, msg) }
	for name, tc := range map[string]struct {
		api  *fakeAPI
		pass bool
		says string
	}{
		"our denial":      {api: &fakeAPI{status: webhookStatus(classWebhook, 403, metav1.StatusReasonForbidden, rule)}, pass: true},
		"admitted":        {api: &fakeAPI{}, says: "admitted"},
		"rbac":            {api: &fakeAPI{status: forbidden(`volumesnapshotclasses.snapshot.storage.k8s.io "c" is forbidden: User "x" cannot create`)}, says: "not by " + classWebhook},
		"unreachable":     {api: &fakeAPI{status: apiStatus(500, metav1.StatusReasonInternalError, fmt.Sprintf("Internal error occurred: failed calling webhook %q: connection refused", classWebhook))}, says: "could not call the webhook"},
		"webhook error":   {api: &fakeAPI{status: webhookStatus(classWebhook, 400, metav1.StatusReasonBadRequest, "cannot decode")}, says: "got BadRequest"},
		"another rule":    {api: &fakeAPI{status: webhookStatus(classWebhook, 403, metav1.StatusReasonForbidden, "something else")}, says: "not for the secret reference"},
		"another webhook": {api: &fakeAPI{status: webhookStatus("other.example.com", 403, metav1.StatusReasonForbidden, rule)}, says: "not by " + classWebhook},
		"no CRD":          {api: &fakeAPI{status: apiStatus(404, metav1.StatusReasonNotFound, "the server could not find the requested resource")}, says: "got NotFound"},
		"no answer":       {api: &fakeAPI{abort: true}, says: "without an API status"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(tc.api)
			defer srv.Close()
			client, err := snapclient.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = selftestWebhook(context.Background(), client, "sk-snapkeeper-test-invalid", &out)
			// Close waits for every handler: what it recorded is read after.
			srv.Close()
			if !slices.Equal(tc.api.dryRun, []string{metav1.DryRunAll}) {
				t.Errorf("dryRun=%v: not a dry run", tc.api.dryRun)
			}
			if c := tc.api.sent; c.Name != "sk-snapkeeper-test-invalid" || c.Driver != "helm-test.snapkeeper.io" ||
				len(c.Parameters) != 1 || c.Parameters["csi.storage.k8s.io/snapshotter-secret-name"] != "only-the-name" {
				t.Errorf("sent %+v", c)
			}
			switch {
			case tc.pass && (err != nil || !strings.Contains(out.String(), "PASS")):
				t.Errorf("err %v, output %q: want PASS", err, out.String())
			case !tc.pass && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("err %v: want one saying %q", err, tc.says)
			}
		})
	}
}

func TestSelftestUsageAndNoCluster(t *testing.T) {
	for _, args := range [][]string{{"selftest"}, {"selftest", "api"}, {"selftest", "webhook", "extra"}, {"selftest", "webhook", "--nope"}} {
		var out, errOut bytes.Buffer
		if code := run("kubectl snapkeeper", args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "kubectl snapkeeper selftest webhook") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	code := run("snapctl", []string{"selftest", "webhook", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "snapctl selftest webhook: FAIL: kubeconfig") {
		t.Errorf("no kubeconfig: exit %d, stderr %q", code, errOut.String())
	}
}
