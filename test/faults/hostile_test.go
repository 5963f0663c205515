package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The hostile-input suite (docs/reliability.md): objects the CRD's rules or
// the webhook refuse today, names at their length limits and absurd values,
// each handed to the real controller. Each must end as a status error (or a
// ready snapshot) and then stay put: no panic, no write loop, and the
// controller keeps serving the good snapshot created alongside.

// quietFor is how long an object's resourceVersion must stand still before
// it counts as settled: longer than the controller's first retries.
func quietFor() time.Duration { return shortOrFull(4*time.Second, 15*time.Second) }

// objRef names an object whose writes the suite watches: a VolumeSnapshot
// (namespace set) or a VolumeSnapshotContent.
type objRef struct{ ns, name string }

func (o objRef) String() string {
	if o.ns == "" {
		return "content " + o.name
	}
	return "snapshot " + o.ns + "/" + shorten(o.name)
}

// shorten keeps messages about 253-character names readable.
func shorten(s string) string {
	if len(s) <= 40 {
		return s
	}
	return fmt.Sprintf("%s…(%d chars)", s[:20], len(s))
}

// resourceVersion reads an object's resourceVersion ("" when it is gone).
func resourceVersion(ctx context.Context, env *framework.Env, o objRef) (string, error) {
	if o.ns == "" {
		c, err := env.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return c.ResourceVersion, nil
	}
	vs, err := env.Snap.SnapshotV1().VolumeSnapshots(o.ns).Get(ctx, o.name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return vs.ResourceVersion, nil
}

// expectSettled fails the test unless, for quietFor() within timeout, every
// object's resourceVersion stands still and the API server counts no write
// of a snapshot object, claim or event at all, refused ones included (a
// create the API server refuses on every retry changes no object): whatever
// the controller had to say is said, and it does not say it again and
// again. It returns how many writes each object took while watched.
func expectSettled(t *testing.T, env *framework.Env, timeout time.Duration, objs ...objRef) map[objRef]int {
	t.Helper()
	ctx := context.Background()
	keep := func(k framework.WriteKey) bool { return framework.IsContractWrite(k) || framework.IsEventWrite(k) }
	last := map[objRef]string{}
	writes := map[objRef]int{}
	since, api := time.Now(), apiWrites(t, env)
	deadline := time.Now().Add(timeout)
	for {
		changed := false
		for _, o := range objs {
			rv, err := resourceVersion(ctx, env, o)
			if err != nil {
				t.Fatalf("%s: %v", o, err)
			}
			if prev, seen := last[o]; seen && prev != rv {
				writes[o]++
				changed = true
			}
			last[o] = rv
		}
		if changed {
			since, api = time.Now(), apiWrites(t, env)
		}
		if time.Since(since) >= quietFor() {
			now := apiWrites(t, env)
			if d := now.Sub(api); d.Total(keep) == 0 {
				return writes
			} else if time.Now().After(deadline) {
				t.Fatalf("API writes still going on after %v: %v in the last %v", timeout, d, quietFor())
			}
			since, api = time.Now(), now
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects still written after %v (writes while watched: %v): a retry loop", timeout, writes)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func apiWrites(t *testing.T, env *framework.Env) framework.APIWrites {
	t.Helper()
	w, err := env.APIWrites(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// expectSnapshotError waits until the status.error of VolumeSnapshot ns/name
// contains every part.
func expectSnapshotError(t *testing.T, env *framework.Env, ns, name string, timeout time.Duration, parts ...string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, timeout, "snapshot "+shorten(name)+" error containing "+strings.Join(parts, " … "), func() (bool, error) {
		vs, err := env.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if vs.Status == nil || vs.Status.Error == nil || vs.Status.Error.Message == nil {
			return false, fmt.Errorf("status %s", framework.JSON(vs.Status))
		}
		msg = *vs.Status.Error.Message
		return framework.ContainsAll(msg, parts), fmt.Errorf("error %q", msg)
	})
	return msg
}

// expectContentError waits until the status.error of content name contains
// every part.
func expectContentError(t *testing.T, env *framework.Env, name string, timeout time.Duration, parts ...string) string {
	t.Helper()
	var msg string
	env.WaitContent(t, name, "error containing "+strings.Join(parts, " … "), timeout, func(c *snapv1.VolumeSnapshotContent) bool {
		if c.Status == nil || c.Status.Error == nil || c.Status.Error.Message == nil {
			return false
		}
		msg = *c.Status.Error.Message
		return framework.ContainsAll(msg, parts)
	})
	return msg
}

// expectWarning waits for a Warning event with reason about the object
// name in namespace ns (contents' events live in "default").
func expectWarning(t *testing.T, env *framework.Env, ns, name, reason string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "Warning "+reason+" about "+shorten(name), func() (bool, error) {
		evs, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name {
				if e.Type == corev1.EventTypeWarning && e.Reason == reason {
					return true, nil
				}
				seen = append(seen, e.Type+" "+e.Reason)
			}
		}
		return false, fmt.Errorf("events about it: %v", seen)
	})
}

// longName is a valid name of exactly n characters starting with prefix.
func longName(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix)-1) + "z"
}

// boundClaim creates a bound claim of the scenario's driver in namespace ns
// with a short volume name (the framework's "pv-<ns>-<claim>" would not fit
// a 253-character claim name), and returns the volume handle.
func boundClaim(t *testing.T, s *framework.Scenario, ns, claim, pvName string, affinity *corev1.VolumeNodeAffinity) string {
	t.Helper()
	ctx := context.Background()
	handle := "vol-" + pvName
	qty := resource.MustParse("1Gi")
	mode := corev1.PersistentVolumeFilesystem
	empty := ""
	pvc, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty}},
			VolumeName: pvName, VolumeMode: &mode, StorageClassName: &empty},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := s.Env.Kube.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: qty},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode, NodeAffinity: affinity,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: s.Drv.Name, VolumeHandle: handle}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim, UID: pvc.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if _, err := s.Env.Kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: qty},
		AccessModes: pvc.Spec.AccessModes}
	if _, err := s.Env.Kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return handle
}

// settledSummary renders expectSettled's counts for the log.
func settledSummary(w map[objRef]int) string {
	keys := slices.SortedFunc(maps.Keys(w), func(a, b objRef) int { return strings.Compare(a.String(), b.String()) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, w[k]))
	}
	if len(parts) == 0 {
		return "no write while watched"
	}
	return strings.Join(parts, ", ")
}
