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
	if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), claim(ns, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// claim is a claim of 1Gi with no storage class, bound to nothing.
func claim(ns, name string) *corev1.PersistentVolumeClaim {
	storageClass := ""
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: &storageClass,
		},
	}
}

// createHostPathPVC creates a claim bound to a hostPath (not CSI) volume.
func createHostPathPVC(t *testing.T, env *framework.Env, ns, name string) {
	t.Helper()
	env.CreateBoundPVC(t, ns, name, framework.PVCOptions{HostPath: "/tmp/" + name})
}
