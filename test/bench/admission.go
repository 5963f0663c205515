package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	// Through the API server: who sent the requests, the 429s the API
	// server answered and the APF priority levels that dispatched them.
	Identity string
	Code429  float64
	Levels   string
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
	b, err := newBed(ctx, "admission", "webhook", o.keep)
	if err != nil {
		return err
	}
	defer b.close(&err)
	env, cl, dir := b.env, b.cl, b.dir
	kc, err := kubeconfigFor(env, roleWebhook)
	if err != nil {
		return err
	}
	// The last --kubeconfig wins over the admin one StartWebhookIn sets.
	wh, err := env.StartWebhookIn(dir, "--kubeconfig="+kc)
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
	appliers, err := newAppliers(ctx, env, slices.Max(o.levels))
	if err != nil {
		return err
	}
	// The authorizer learns of the new RoleBinding from its informers.
	for _, r := range reqs {
		if err := framework.PollContext(ctx, 30*time.Second, "an applier's dry run", func() error { return r.dryRun(ctx, appliers[len(appliers)-1]) }); err != nil {
			return fmt.Errorf("%s as an applier: %w", r.name, err)
		}
	}
	// The webhook reads the fixture from informers: wait until it admits
	// the restore through the API server.
	if err := framework.PollContext(ctx, 30*time.Second, "the webhook to admit the restore", func() error { return reqs[0].dryRun(ctx, cl) }); err != nil {
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
			row, err := apiLatency(ctx, b.api, appliers, r, "API server + webhook", c, o.apiRequests)
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
			row, err := apiLatency(ctx, b.api, appliers, r, "API server alone", c, o.apiRequests)
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
	vs := framework.DynamicSnapshot(benchNamespace, "dynamic", admSource, nil)
	vs.TypeMeta = metav1.TypeMeta{APIVersion: snapv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshot"}
	return vs
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
