// Command run is `make run`: a local control plane (etcd, kube-apiserver,
// the snapshot CRDs), the mock CSI driver, the webhook (registered) and the
// controller (binder and CSI side), with examples/ applied. It prints the
// KUBECONFIG to use and stops everything on Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	step("Starting etcd and kube-apiserver, installing the snapshot CRDs")
	env, err := framework.Start(ctx)
	if err != nil {
		return err
	}
	var stops []func()
	defer func() {
		step("Stopping everything")
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		env.Stop()
		fmt.Println("Logs were in", env.Dir, "(removed)")
		os.RemoveAll(env.Dir)
	}()

	step("Starting the mock CSI driver")
	drv, err := framework.StartCSIDriver(env.Dir, framework.CSIDriverOptions{})
	if err != nil {
		return err
	}
	stops = append(stops, drv.Stop)

	step("Starting the webhook and registering it")
	wh, err := env.StartWebhookIn(env.Dir)
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		env.UnregisterWebhook(context.Background(), wh.ConfigName)
		wh.Proc.Stop(5 * time.Second)
	})

	step("Starting the controller (binder and CSI side)")
	ctrl, err := env.StartComponent(env.Dir, "controller", "./cmd/controller",
		"--components=binder,csi", "--csi-address="+drv.Socket)
	if err != nil {
		return err
	}
	stops = append(stops, func() { ctrl.Proc.Stop(10 * time.Second) })

	step("Applying examples/")
	examples := filepath.Join(framework.RepoRoot(), "examples")
	if out, stderr, err := env.Kubectl(ctx, nil, "apply", "-f", examples); err != nil {
		return fmt.Errorf("kubectl apply -f examples/: %v\n%s%s", err, out, stderr)
	} else {
		fmt.Print(out)
	}
	if err := bindExampleClaim(ctx, env); err != nil {
		return err
	}

	fmt.Printf(`
snapkeeper is running. In another shell:

  export KUBECONFIG=%s
  kubectl get crd
  kubectl get volumesnapshotclass,volumesnapshot,volumesnapshotcontent -A
  kubectl describe volumesnapshot data-snap
  kubectl apply -f examples/                  # re-apply: admitted, nothing changes
  kubectl apply -f examples/invalid/          # each one rejected by the webhook, with the fix
  kubectl delete volumesnapshot data-snap     # the backend snapshot and the content go too

Logs: %s  (controller.log, webhook.log, mock-csi-driver.log, kube-apiserver.log)
Metrics: http://%s/metrics   Press Ctrl-C to stop everything.
`, env.Kubeconfig, env.Dir, ctrl.HTTPAddr)
	select {
	case <-ctx.Done():
	case <-exited(ctrl.Proc, wh.Proc):
		return fmt.Errorf("a component exited; see the logs in %s", env.Dir)
	}
	return nil
}

// bindExampleClaim marks the example PV and claim Bound, the PV
// controller's job in a real cluster (none runs here).
func bindExampleClaim(ctx context.Context, env *framework.Env) error {
	pv, err := env.Kube.CoreV1().PersistentVolumes().Get(ctx, "pv-data", metav1.GetOptions{})
	if err != nil {
		return err
	}
	pvc, err := env.Kube.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Status.Phase != corev1.VolumeBound {
		pv.Spec.ClaimRef.UID = pvc.UID
		if pv, err = env.Kube.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
		pv.Status.Phase = corev1.VolumeBound
		if _, err := env.Kube.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.Capacity = pv.Spec.Capacity
		pvc.Status.AccessModes = pv.Spec.AccessModes
		if _, err := env.Kube.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func exited(procs ...*framework.Process) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			for _, p := range procs {
				if p.Exited() {
					close(ch)
					return
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	return ch
}

func step(s string) { fmt.Printf("==> %s\n", s) }
