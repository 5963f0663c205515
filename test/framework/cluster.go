package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// PlaneEnv names the environment variable that switches every suite's
// shared control plane to the cluster-like one: SNAPKEEPER_PLANE=cluster
// adds kube-controller-manager to etcd and kube-apiserver, and scenarios
// (NewScenario) then provision their claims through the real csi-provisioner
// instead of binding them by hand.
const PlaneEnv = "SNAPKEEPER_PLANE"

// clusterFromEnv reports whether PlaneEnv asks for the cluster-like plane.
func clusterFromEnv() bool { return os.Getenv(PlaneEnv) == "cluster" }

// Cluster reports whether kube-controller-manager runs on this plane: the
// garbage collector, the namespace controller, the PersistentVolume binder
// and the other controllers that need no kubelet act on the objects.
func (cp *ControlPlane) Cluster() bool { return cp.cluster }

// ControllerManager is the plane's kube-controller-manager (nil when
// Cluster is false), for tests that stop or restart it.
func (cp *ControlPlane) ControllerManager() *Process { return cp.kcm }

// StartControllerManager starts kube-controller-manager (bin/, the same
// k8s.io/kubernetes release as the API server) with every controller that
// is on by default: the ones that need a kubelet or a cloud find nothing to
// do. Controllers run under their own ServiceAccounts
// (--use-service-account-credentials), as kubeadm sets it up, so their
// RBAC is the API server's bootstrap policy. It returns once /healthz
// answers; the controllers' informers sync shortly after.
func (cp *ControlPlane) StartControllerManager(ctx context.Context) error {
	if cp.kcm != nil {
		return nil
	}
	cp.cluster = true
	bin, port, err := serverTool("kube-controller-manager")
	if err != nil {
		return err
	}
	dir := filepath.Join(cp.Dir, "kube-controller-manager")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(cp.Dir, "sa.key"),
		"--root-ca-file=" + filepath.Join(cp.Dir, "apiserver-certs", "apiserver.crt"),
		"--controllers=*",
		"--profiling=false",
		"-v=1",
	}
	cp.kcm, err = StartProcess(dir, "kube-controller-manager", bin, args)
	if err != nil {
		return err
	}
	cp.kcmURL = fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return cp.waitControllerManager(ctx)
}

func (cp *ControlPlane) waitControllerManager(ctx context.Context) error {
	return waitHealthy(ctx, "kube-controller-manager", cp.kcmURL, "", cp.kcm)
}

// StopControllerManager stops kube-controller-manager (a plane whose
// neighbours are gone); StartControllerManager starts it again.
func (cp *ControlPlane) StopControllerManager() {
	if cp.kcm != nil {
		cp.kcm.Stop(10 * time.Second)
		cp.kcm = nil
	}
}
