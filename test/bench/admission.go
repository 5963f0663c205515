package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// latencyRow is one admission latency measurement.
type latencyRow struct {
	Request     string // what is admitted
	Path        string // "webhook (direct)", "API server + webhook", "API server alone"
	Concurrency int
	N           int
	P50, P99    time.Duration
	PerSecond   float64
}

type admissionResult struct {
	Missing bool // ./cmd/webhook does not exist yet
	Rows    []latencyRow
	Err     error
}

type admissionOptions struct {
	requests    int // per row, direct
	apiRequests int // per row, through the API server
	levels      []int
	keep        bool
}

func runAdmission(ctx context.Context, o admissionOptions) *admissionResult {
	res := &admissionResult{}
	if _, err := os.Stat(filepath.Join(framework.RepoRoot(), "cmd", "webhook", "main.go")); err != nil {
		res.Missing = true
		return res
	}
	res.Err = admission(ctx, o, res)
	return res
}

const (
	admSnapshot = "ready"
	admContent  = "bench-ready-content"
	admSource   = "src"
)

// admissionRequest is one kind of request, sent straight to the webhook as
// an AdmissionReview and through the API server as a dry-run create.
type admissionRequest struct {
	name   string
	path   string // webhook path
	review []byte
	dryRun func(ctx context.Context, cl *clients) error
}

func admission(ctx context.Context, o admissionOptions, res *admissionResult) (err error) {
	logf("[admission] starting a control plane and the webhook")
	env, err := framework.Start(ctx)
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer stopEnv(env, o.keep, &err)
	cl, err := newClients(env)
	if err != nil {
		return err
	}
	dir, err := mkdir(env, "webhook")
	if err != nil {
		return err
	}
	wh, err := env.StartWebhookIn(dir)
	if err != nil {
		return fmt.Errorf("start webhook: %w", err)
	}
	ownBuilt = "./cmd/webhook"
	defer wh.Proc.Stop(5 * time.Second)
	if err := admissionFixture(ctx, env); err != nil {
		return fmt.Errorf("fixture: %w", err)
	}
	reqs, err := admissionRequests()
	if err != nil {
		return err
	}
	// The webhook reads the fixture from informers: wait until it admits
	// the restore through the API server.
	if err := retry(ctx, 30*time.Second, func() error { return reqs[0].dryRun(ctx, cl) }); err != nil {
		return fmt.Errorf("restore never admitted: %w", err)
	}
	for _, r := range reqs {
		for _, c := range o.levels {
			row, err := directLatency(ctx, wh, r, c, o.requests)
			if err != nil {
				return err
			}
			res.Rows = append(res.Rows, row)
			logf("[admission] %s %s c=%d p50=%s p99=%s", row.Request, row.Path, c, row.P50, row.P99)
		}
		for _, c := range o.levels {
			row, err := apiLatency(ctx, cl, r, "API server + webhook", c, o.apiRequests)
			if err != nil {
				return err
			}
			res.Rows = append(res.Rows, row)
			logf("[admission] %s %s c=%d p50=%s p99=%s", row.Request, row.Path, c, row.P50, row.P99)
		}
	}
	// The same requests without the webhook: what the API server costs alone.
	env.UnregisterWebhook(ctx, wh.ConfigName)
	wh.Proc.Stop(5 * time.Second)
	if err := waitWebhookGone(ctx, cl); err != nil {
		return err
	}
	for _, r := range reqs {
		for _, c := range o.levels {
			row, err := apiLatency(ctx, cl, r, "API server alone", c, o.apiRequests)
			if err != nil {
				return err
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return nil
}

// admissionFixture: a bound source PVC, the driver's default class and a
// ready pre-provisioned snapshot with its content, so that a restore is
// checked against the snapshot, its content and its size.
func admissionFixture(ctx context.Context, env *framework.Env) error {
	if err := prepare(ctx, env, 0); err != nil {
		return err
	}
	if _, err := env.BindPVC(ctx, benchNamespace, admSource, framework.PVCOptions{Driver: framework.MockDriverName}); err != nil {
		return err
	}
	handle, mode, contentName := "bench-handle", corev1.PersistentVolumeFilesystem, admContent
	size := resource.MustParse("1Gi")
	ready := true
	content, err := env.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: admContent},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: benchNamespace, Name: admSnapshot},
			DeletionPolicy:    snapv1.VolumeSnapshotContentRetain,
			Driver:            framework.MockDriverName,
			SourceVolumeMode:  &mode,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	sizeBytes := size.Value()
	content.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, RestoreSize: &sizeBytes}
	if _, err := env.Snap.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, content, metav1.UpdateOptions{}); err != nil {
		return err
	}
	vs, err := env.Snap.SnapshotV1().VolumeSnapshots(benchNamespace).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: admSnapshot, Namespace: benchNamespace},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &contentName}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &contentName, ReadyToUse: &ready, RestoreSize: &size}
	_, err = env.Snap.SnapshotV1().VolumeSnapshots(benchNamespace).UpdateStatus(ctx, vs, metav1.UpdateOptions{})
	return err
}

func restorePVC() *corev1.PersistentVolumeClaim {
	apiGroup, mode, sc := snapv1.GroupName, corev1.PersistentVolumeFilesystem, ""
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "restore", Namespace: benchNamespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeMode:       &mode,
			StorageClassName: &sc,
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: admSnapshot},
		},
	}
}

func dynamicSnapshot() *snapv1.VolumeSnapshot {
	src := admSource
	return &snapv1.VolumeSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: snapv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshot"},
		ObjectMeta: metav1.ObjectMeta{Name: "dynamic", Namespace: benchNamespace},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src}},
	}
}

func admissionRequests() ([]admissionRequest, error) {
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	pvcReview, err := review(restorePVC(), schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"},
		schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"})
	if err != nil {
		return nil, err
	}
	vsReview, err := review(dynamicSnapshot(), snapv1.SchemeGroupVersion.WithResource("volumesnapshots"),
		snapv1.SchemeGroupVersion.WithKind("VolumeSnapshot"))
	if err != nil {
		return nil, err
	}
	return []admissionRequest{
		{
			name: "PVC restore from a ready snapshot", path: "/validate/persistentvolumeclaims", review: pvcReview,
			dryRun: func(ctx context.Context, cl *clients) error {
				_, err := cl.kube.CoreV1().PersistentVolumeClaims(benchNamespace).Create(ctx, restorePVC(), dryRun)
				return err
			},
		},
		{
			name: "dynamic VolumeSnapshot", path: "/validate/volumesnapshots", review: vsReview,
			dryRun: func(ctx context.Context, cl *clients) error {
				_, err := cl.snap.SnapshotV1().VolumeSnapshots(benchNamespace).Create(ctx, dynamicSnapshot(), dryRun)
				return err
			},
		},
	}, nil
}

func review(obj runtime.Object, gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) ([]byte, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := obj.(metav1.Object)
	return json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("00000000-0000-0000-0000-000000000001"),
			Kind:      metav1.GroupVersionKind(gvk),
			Resource:  metav1.GroupVersionResource(gvr),
			Name:      m.GetName(),
			Namespace: m.GetNamespace(),
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
}

func directLatency(ctx context.Context, wh *framework.Webhook, r admissionRequest, conc, n int) (latencyRow, error) {
	hc := wh.Client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = conc
	url := "https://" + wh.Addr + r.path
	send := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.review))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("webhook answered %s: %s", resp.Status, body)
		}
		if out.Response == nil || !out.Response.Allowed {
			return fmt.Errorf("webhook denied the benchmark's request: %s", body)
		}
		return nil
	}
	// Open the connections first: the API server keeps them alive, so TLS
	// handshakes are not part of a request's latency.
	if _, _, err := load(ctx, conc, 4*conc, send); err != nil {
		return latencyRow{}, err
	}
	lat, elapsed, err := load(ctx, conc, n, send)
	if err != nil {
		return latencyRow{}, err
	}
	return row(r.name, "webhook (direct)", conc, lat, elapsed), nil
}

func apiLatency(ctx context.Context, cl *clients, r admissionRequest, path string, conc, n int) (latencyRow, error) {
	send := func(ctx context.Context) error { return r.dryRun(ctx, cl) }
	if _, _, err := load(ctx, conc, 4*conc, send); err != nil {
		return latencyRow{}, err
	}
	lat, elapsed, err := load(ctx, conc, n, send)
	if err != nil {
		return latencyRow{}, fmt.Errorf("%s via %s: %w", r.name, path, err)
	}
	return row(r.name, path, conc, lat, elapsed), nil
}

// load sends n requests from conc goroutines and returns each latency.
func load(ctx context.Context, conc, n int, send func(context.Context) error) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var mu sync.Mutex
	start := time.Now()
	err := parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		t := time.Now()
		err := send(ctx)
		d := time.Since(t)
		mu.Lock()
		lat[i] = d
		mu.Unlock()
		return err
	})
	return lat, time.Since(start), err
}

func row(name, path string, conc int, lat []time.Duration, elapsed time.Duration) latencyRow {
	slices.Sort(lat)
	return latencyRow{Request: name, Path: path, Concurrency: conc, N: len(lat),
		P50: lat[len(lat)/2], P99: lat[(len(lat)*99)/100], PerSecond: float64(len(lat)) / elapsed.Seconds()}
}

// waitWebhookGone waits until the API server stops calling the webhook: a
// class with an unknown reserved parameter is then admitted (dry run).
func waitWebhookGone(ctx context.Context, cl *clients) error {
	return retry(ctx, 30*time.Second, func() error {
		_, err := cl.snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
			ObjectMeta:     metav1.ObjectMeta{Name: "bench-probe"},
			Driver:         "probe.example.com",
			DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
			Parameters:     map[string]string{"csi.storage.k8s.io/not-a-known-key": "x"},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
}

func retry(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
