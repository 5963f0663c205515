package admission

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/conversion"
)

func postConversion(t *testing.T, h http.Handler, body string) (int, *conversionResponse) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out conversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil ||
		out.APIVersion != conversionReviewV1 || out.Kind != conversionReviewKind {
		t.Fatalf("answer is not a ConversionReview with a response (%v): %s", err, rec.Body.String())
	}
	return rec.Code, out.Response
}

const groupV1beta1Content = `{"apiVersion":"groupsnapshot.storage.k8s.io/v1beta1","kind":"VolumeGroupSnapshotContent",
 "metadata":{"name":"gc"},"spec":{"driver":"d"},
 "status":{"volumeGroupSnapshotHandle":"g1","volumeSnapshotHandlePairList":[{"volumeHandle":"v1","snapshotHandle":"s1"}]}}`

func TestConvertAnswersEveryObjectAtTheDesiredVersion(t *testing.T) {
	metrics := NewMetrics(prometheus.NewRegistry())
	members := fakeMembers{"d/g1/s1": {ReadyToUse: ptrTo(true), CreationTime: ptrTo(int64(1733300000123456789))}}
	h := NewConverter(members, 0, metrics)
	code, resp := postConversion(t, h, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u1",
	 "desiredAPIVersion":"groupsnapshot.storage.k8s.io/v1","objects":[`+groupV1beta1Content+`,
	 {"apiVersion":"groupsnapshot.storage.k8s.io/v1beta2","kind":"VolumeGroupSnapshotClass","metadata":{"name":"c"},"driver":"d","deletionPolicy":"Delete"}]}}`)
	if code != http.StatusOK || resp.UID != "u1" || resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 2 {
		t.Fatalf("code %d, response %+v", code, resp)
	}
	got := string(resp.ConvertedObjects[0].Raw)
	for _, want := range []string{`"apiVersion":"groupsnapshot.storage.k8s.io/v1"`,
		`"volumeSnapshotInfoList":[{"creationTime":1733300000123456789,"readyToUse":true,"snapshotHandle":"s1","volumeHandle":"v1"}]`} {
		if !strings.Contains(got, want) {
			t.Errorf("converted content lacks %s:\n%s", want, got)
		}
	}
	if c := testutil.ToFloat64(metrics.conversions.WithLabelValues("VolumeGroupSnapshotContent", "v1beta1", "v1", "success")); c != 1 {
		t.Errorf("conversions counted %v", c)
	}
}

func TestConvertFailsTheWholeReviewNamingTheObject(t *testing.T) {
	h := NewConverter(nil, 0, nil)
	code, resp := postConversion(t, h, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u2",
	 "desiredAPIVersion":"groupsnapshot.storage.k8s.io/v1","objects":[`+groupV1beta1Content+`,
	 {"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"s"}}]}}`)
	if code != http.StatusOK || resp.UID != "u2" || resp.Result.Status != metav1.StatusFailure || len(resp.ConvertedObjects) != 0 ||
		resp.Result.Message != `objects[1]: VolumeSnapshot s: apiVersion "snapshot.storage.k8s.io/v1": not of group groupsnapshot.storage.k8s.io` {
		t.Fatalf("code %d, response %+v", code, resp)
	}
}

func TestConvertRefusesWhatTheAPIServerNeverSends(t *testing.T) {
	h := NewConverter(nil, 1<<20, nil)
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"u"}}`, 400, "list only v1 in the CRD's conversionReviewVersions"},
		{`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, 400, "has no request"},
		{`not json`, 400, "not a JSON ConversionReview"},
		{`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"groupsnapshot.storage.k8s.io/v1","objects":["x"]}}`, 200, "objects[0]: not a JSON object"},
		{`"` + strings.Repeat("x", 1<<20) + `"`, 413, "larger than the limit"},
	} {
		code, resp := postConversion(t, h, c.body)
		if code != c.code || !strings.Contains(resp.Result.Message, c.want) {
			t.Errorf("%.60s: code %d, message %q; want %d with %q", c.body, code, resp.Result.Message, c.code, c.want)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/convert", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}

type fakeMembers map[string]conversion.MemberInfo

func (f fakeMembers) Member(driver, group, handle string) (conversion.MemberInfo, bool) {
	m, ok := f[driver+"/"+group+"/"+handle]
	return m, ok
}

func ptrTo[T any](v T) *T { return &v }
