package doctor

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// runDoctor runs the built snapctl doctor against the control plane and
// returns its output and exit code.
func runDoctor(t *testing.T, env *framework.Env, args ...string) (string, int) {
	t.Helper()
	bin, err := framework.OwnBinary("./cmd/snapctl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"doctor", "--kubeconfig=" + env.Kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		if exit.ExitCode() == 2 {
			t.Logf("snapctl doctor stderr: %s", errOut.String())
		}
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("snapctl doctor: %v\n%s", err, errOut.String())
		return "", 0
	}
}

// lineOf returns the output line about object ("Kind ns/name"), or "".
func lineOf(out, object string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, object+" [") {
			return l
		}
	}
	return ""
}

// createPendingPVC creates a claim that no volume binds.
func createPendingPVC(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), claim(ns, name, ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func claim(ns, name, volume string) *corev1.PersistentVolumeClaim {
	storageClass := ""
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:       volume,
			StorageClassName: &storageClass,
		},
	}
}

// createHostPathPVC creates a claim bound to a hostPath (not CSI) volume.
func createHostPathPVC(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pvName := "pv-" + ns + "-" + name
	created, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim(ns, name, pvName), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name, UID: created.UID},
		},
	}
	if _, err := env.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The PV controller, where it runs, binds them too.
	claims := env.Kube.CoreV1().PersistentVolumeClaims(ns)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil || cur.Status.Phase == corev1.ClaimBound {
			return err
		}
		cur.Status.Phase = corev1.ClaimBound
		_, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
