package csiside

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"

	"google.golang.org/grpc/codes"

	"github.com/snapkeeper/snapkeeper/pkg/csi"
	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/testkit"
)

// Contents that break the CRD's rules (stored before the rules existed),
// classes whose secret templates the webhook would refuse (stored while it
// was absent), and absurd driver answers: each ends in one status error
// naming the field and the fix, without a CSI call, or is stored sanely.
func TestHostileContents(t *testing.T) {
	both := func(c *snapv1.VolumeSnapshotContent) { c.Spec.Source.SnapshotHandle = ptr.To("h1") }
	neither := func(c *snapv1.VolumeSnapshotContent) { c.Spec.Source = snapv1.VolumeSnapshotContentSource{} }
	noNamespace := func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotRef.Namespace = "" }
	bothMsg := "VolumeSnapshotContent c1 sets both spec.source.volumeHandle and spec.source.snapshotHandle; the fields cannot be changed: " +
		"delete the content and create one with exactly one of them (volumeHandle for a new snapshot of a volume, snapshotHandle for an existing backend snapshot)"
	neitherMsg := strings.Replace(bothMsg, "sets both spec.source.volumeHandle and", "sets neither spec.source.volumeHandle nor", 1)
	refMsg := "VolumeSnapshotContent c1 has a spec.volumeSnapshotRef without name or namespace (name \"snap-1\", namespace \"\"); " +
		"both must name the VolumeSnapshot it belongs to: delete the content and create it with both set"
	hostileList := testkit.SnapshotClass("gold", testkit.Params(map[string]string{
		snapshot.ParamListSecretName: "creds", snapshot.ParamListSecretNamespace: "${volumesnapshot.name}",
	}))
	listMsg := "Failed to check snapshot status: VolumeSnapshotClass gold: parameter " + snapshot.ParamListSecretNamespace +
		": the namespace template \"${volumesnapshot.name}\" uses ${volumesnapshot.name}, which is not allowed in a namespace; " +
		"use ${volumesnapshotcontent.name}, ${volumesnapshot.namespace} or a literal namespace"
	negative := snapOf("snap-id", true)
	negative.SizeBytes = -1
	// 2^53: the fake API server applies patches through float64, exact up
	// to 2^53; TestHostileValues sends 2^63-1 to a real one.
	huge := snapOf("snap-id", true)
	huge.SizeBytes = 1 << 53
	hugeStatus := testkit.Cut("snap-id", true)
	hugeStatus.RestoreSize = ptr.To(int64(1 << 53))
	noSize := testkit.Cut("snap-id", true)
	noSize.RestoreSize = nil
	// A driver that answers with a megabyte (a stack trace, a dump): stored
	// cut to snapshot.MaxMessageBytes, or every status write of the content
	// would fail on etcd's request limit and nothing would ever show.
	bigErr := "volume vol-1: " + strings.Repeat("frame ", 200_000)
	bigMsg := snapshot.TrimMessage("Failed to create snapshot: InvalidArgument: " + bigErr)
	runSyncCases(t, map[string]syncCase{
		"a driver error of a megabyte is stored cut to a kilobyte": {
			setup:          setup{contents: contents(newContent("c1")), objects: classes},
			calls:          []call{createCall(goldRequest(nil), nil, grpcErr(codes.InvalidArgument, bigErr))},
			wantRequeue:    retryBackoff.Start,
			wantWrites:     []string{"patch status", "patch"},
			wantEvents:     []string{"Warning SnapshotCreationFailed " + bigMsg},
			wantFinalizers: bound,
			wantStatus:     ptr.To(errorStatus(bigMsg)),
		},
		"the same cut driver error again costs nothing": {
			setup: setup{contents: contents(newContent("c1", testkit.Status(errorStatus(bigMsg)))), objects: classes},
			calls: []call{createCall(goldRequest(nil), nil, grpcErr(codes.InvalidArgument, bigErr))},
			// Only the mark goes (the driver refused the request itself);
			// the status stays as it is.
			wantRequeue:    retryBackoff.Start,
			wantWrites:     []string{"patch"},
			wantFinalizers: bound,
			wantStatus:     ptr.To(errorStatus(bigMsg)),
		},
		"a content with both handles gets one error and no CSI call": {
			setup:      setup{contents: contents(newContent("c1", testkit.ContentFunc(both))), objects: classes},
			wantWrites: []string{"patch status"}, wantEvents: []string{"Warning ContentValidationError " + bothMsg},
			wantMark: true, wantFinalizers: bound, wantStatus: ptr.To(errorStatus(bothMsg)),
		},
		"a content with neither handle gets one error and no CSI call": {
			setup:      setup{contents: contents(newContent("c1", testkit.ContentFunc(neither))), objects: classes},
			wantWrites: []string{"patch status"}, wantEvents: []string{"Warning ContentValidationError " + neitherMsg},
			wantMark: true, wantFinalizers: bound, wantStatus: ptr.To(errorStatus(neitherMsg)),
		},
		"a content whose reference lacks its namespace gets one error and no CSI call": {
			setup:      setup{contents: contents(newContent("c1", testkit.ContentFunc(noNamespace))), objects: classes},
			wantWrites: []string{"patch status"}, wantEvents: []string{"Warning ContentValidationError " + refMsg},
			wantMark: true, wantFinalizers: bound, wantStatus: ptr.To(errorStatus(refMsg)),
		},
		"an error already shown costs nothing": {
			setup:    setup{contents: contents(newContent("c1", testkit.ContentFunc(both), testkit.Status(errorStatus(bothMsg)))), objects: classes},
			wantMark: true, wantFinalizers: bound, wantStatus: ptr.To(errorStatus(bothMsg)),
		},
		"a list secret namespace the snapshot's name would pick is refused before any read": {
			setup: setup{contents: contents(newContent("c1", unmarked(), testkit.PreProvisioned("h1"))), objects: objs(hostileList),
				caps: csi.Capabilities{CreateDeleteSnapshot: true, ListSnapshots: true}},
			wantRequeue: retryBackoff.Start, wantWrites: []string{"patch status"},
			wantEvents:     []string{"Warning SnapshotContentCheckandUpdateFailed " + listMsg},
			wantFinalizers: bound, wantStatus: ptr.To(errorStatus(listMsg)),
		},
		"a negative size from the driver leaves restoreSize unset": {
			setup:      setup{contents: contents(newContent("c1")), objects: classes},
			calls:      []call{createCall(goldRequest(nil), negative, nil)},
			wantWrites: []string{"patch status", "patch"}, wantFinalizers: bound, wantStatus: &noSize,
		},
		"a huge size from the driver is stored as it is": {
			setup:      setup{contents: contents(newContent("c1")), objects: classes},
			calls:      []call{createCall(goldRequest(nil), huge, nil)},
			wantWrites: []string{"patch status", "patch"}, wantFinalizers: bound, wantStatus: &hugeStatus,
		},
	})
}

// client-go logs response bodies through the request context's logger
// from -v=8 on: a Secret read with the worker's context would write its
// data (base64 in JSON) into the controller's log. secret reads it with a
// logger that discards everything.
func TestSecretReadLogsNoData(t *testing.T) {
	const value = "planted-unit-S3cr3t"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&corev1.Secret{
			TypeMeta:   metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns"},
			Data:       map[string][]byte{"password": []byte(value)},
		})
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(10), textlogger.Output(&buf))))
	encoded, _ := json.Marshal([]byte(value)) // the base64 form in a JSON body

	// The threat is real: the same read with the worker's context logs it.
	if _, err := kube.CoreV1().Secrets("ns").Get(ctx, "creds", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), strings.Trim(string(encoded), `"`)) {
		t.Fatalf("client-go no longer logs response bodies at -v=10; this test shows nothing:\n%s", buf.String())
	}
	buf.Reset()
	c := &Controller{cfg: Config{Kube: kube}}
	data, err := c.secret(ctx, "ns", "creds")
	if err != nil || data["password"] != value {
		t.Fatalf("secret = %v, %v", data, err)
	}
	if s := buf.String(); strings.Contains(s, strings.Trim(string(encoded), `"`)) || strings.Contains(s, value) {
		t.Fatalf("reading the secret logged its data:\n%s", s)
	}
}
