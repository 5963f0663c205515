package admission

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
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

func TestContentMembersFindsTheMemberOfItsGroupOnly(t *testing.T) {
	content := func(name, driver, handle, group string, ready bool) *snapv1.VolumeSnapshotContent {
		c := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: snapv1.VolumeSnapshotContentSpec{Driver: driver},
			Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, RestoreSize: ptrTo(int64(7))}}
		if group != "" {
			c.Status.VolumeGroupSnapshotHandle = &group
		}
		return c
	}
	//lint:ignore SA1019 client/v8 generates no apply configurations, so it has no NewClientset
	factory := snapinformers.NewSharedInformerFactory(snapfake.NewSimpleClientset(), 0)
	m, err := NewContentMembers(factory)
	if err != nil {
		t.Fatal(err)
	}
	// The factory is not started: the cache holds what the test puts there.
	for _, c := range []*snapv1.VolumeSnapshotContent{
		content("a", "d", "s1", "g1", true),
		content("b", "other", "s1", "g1", false), // another driver's handle
		content("c", "d", "s2", "", true),
		content("e", "d", "dup", "g1", true), content("f", "d", "dup", "g1", true),
	} {
		if err := factory.Snapshot().V1().VolumeSnapshotContents().Informer().GetIndexer().Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if info, ok := m.Member("d", "g1", "s1"); !ok || !*info.ReadyToUse || *info.RestoreSize != 7 {
		t.Errorf("d/g1/s1: %+v %v", info, ok)
	}
	for _, q := range [][3]string{{"d", "g2", "s1"}, {"d", "g1", "s2"}, {"d", "g1", "dup"}, {"d", "", "none"}} {
		if info, ok := m.Member(q[0], q[1], q[2]); ok {
			t.Errorf("%v found %+v", q, info)
		}
	}
	if _, ok := m.Member("d", "", "s2"); !ok {
		t.Error("d//s2 (no group handle asked) not found")
	}
}

type fakeMembers map[string]conversion.MemberInfo

func (f fakeMembers) Member(driver, group, handle string) (conversion.MemberInfo, bool) {
	m, ok := f[driver+"/"+group+"/"+handle]
	return m, ok
}

func ptrTo[T any](v T) *T { return &v }
