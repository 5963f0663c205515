// Command run is `make run`: a local cluster-like control plane (etcd,
// kube-apiserver, kube-controller-manager, the snapshot CRDs), the mock CSI
// driver with the real csi-provisioner next to it, the webhook (registered)
// and the controller (binder, CSI side and schedules), with examples/ applied
// in order: a claim provisioned and bound for real, a snapshot of it, a
// restore, and a schedule that snapshots the claim every minute and keeps
// three. It prints the KUBECONFIG to use and stops everything on Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The names the examples use.
const (
	storageClass = "mock-csi"       // the provisioner's class (examples/10-volume.yaml, 30-restore.yaml)
	namespace    = "default"        // every example lives here
	sourceClaim  = "data"           // examples/10-volume.yaml
	snapshotName = "data-snap"      // examples/20-snapshot.yaml
	restoreClaim = "data-restored"  // examples/30-restore.yaml
	scheduleName = "every-minute"   // examples/40-schedule.yaml
	bindTimeout  = 90 * time.Second // provisioning + PV binder
	readyTimeout = 60 * time.Second // CreateSnapshot + readiness
	sizeBytes    = int64(1 << 30)   // what the mock reports for snapshots of the claim's volume
	stopGrace    = 10 * time.Second // per process on Ctrl-C
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
	step("Starting etcd, kube-apiserver and kube-controller-manager, installing the snapshot CRDs")
	env, err := framework.StartWith(ctx, framework.ControlPlaneOptions{Cluster: true})
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

	step("Starting csi-provisioner for it, with StorageClass " + storageClass)
	prov, err := env.LaunchProvisioner(ctx, env.Dir, drv.Socket, drv.Name, framework.ProvisionerOptions{
		StorageClass:  storageClass,
		ReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
	})
	if err != nil {
		return err
	}
	stops = append(stops, func() { prov.Proc.Stop(stopGrace) })

	step("Starting the webhook and registering it")
	wh, err := env.StartWebhookIn(env.Dir)
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		env.UnregisterWebhook(context.Background(), wh.ConfigName)
		wh.Proc.Stop(5 * time.Second)
	})

	step("Starting the controller (binder, CSI side and schedules)")
	ctrl, err := env.StartComponent(env.Dir, "controller", "./cmd/controller",
		"--components=binder,csi,schedules", "--csi-address="+drv.Socket)
	if err != nil {
		return err
	}
	stops = append(stops, func() { ctrl.Proc.Stop(stopGrace) })

	if err := applyExamples(ctx, env, drv); err != nil {
		return err
	}

	fmt.Printf(`
snapkeeper is running; every example is applied. In another shell:

  export KUBECONFIG=%s
  kubectl get crd
  kubectl get pvc,pv -A                       # "data" provisioned by csi-provisioner, bound by kube-controller-manager
  kubectl get volumesnapshotclass,volumesnapshot,volumesnapshotcontent -A
  kubectl describe volumesnapshot data-snap
  kubectl describe pvc data-restored          # the restore: dataSource VolumeSnapshot data-snap
  kubectl get snapshotschedule -A -w          # examples/40-schedule.yaml: a snapshot every minute, three kept
  kubectl get volumesnapshot -l snapkeeper.io/schedule=every-minute -w
  kubectl apply -f examples/                  # re-apply: admitted, nothing changes
  kubectl apply -f examples/invalid/          # each one rejected by the webhook, with the fix
  kubectl delete pvc data-restored            # the provisioner deletes its volume (reclaimPolicy Delete)
  kubectl delete volumesnapshot data-snap     # the backend snapshot and the content go too

Logs: %s  (controller.log, webhook.log, mock-csi-driver.log, csi-provisioner.log,
      kube-apiserver.log, kube-controller-manager/kube-controller-manager.log)
Metrics: http://%s/metrics   Press Ctrl-C to stop everything.
`, env.Kubeconfig, env.Dir, ctrl.HTTPAddr)
	select {
	case <-ctx.Done():
	case <-exited(ctrl.Proc, wh.Proc, prov.Proc, env.ControllerManager()):
		return fmt.Errorf("a component exited; see the logs in %s", env.Dir)
	}
	return nil
}

// applyExamples applies examples/*.yaml one file at a time in lexical
// order (examples/invalid/ is left out: it is there to be rejected), and
// after the files that create something waits for what a newcomer should
// see: the claim Bound, the snapshot ready, the restored claim Bound.
func applyExamples(ctx context.Context, env *framework.Env, drv *framework.CSIDriver) error {
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "examples", "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		step("Applying examples/" + filepath.Base(f))
		applied := time.Now()
		if out, stderr, err := env.Kubectl(ctx, nil, "apply", "-f", f); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %v\n%s%s", f, err, out, stderr)
		} else {
			fmt.Print(out, stderr)
		}
		switch filepath.Base(f) {
		case "10-volume.yaml":
			pv, err := waitBound(ctx, env, sourceClaim, applied)
			if err != nil {
				return err
			}
			// The mock reports snapshots of a volume as 0 bytes unless told
			// its size: tell it, so the snapshot's restoreSize is 1Gi.
			if pv.Spec.CSI != nil {
				if _, err := drv.PatchVolumeSize(ctx, pv.Spec.CSI.VolumeHandle, sizeBytes); err != nil {
					return err
				}
			}
		case "20-snapshot.yaml":
			if err := waitReady(ctx, env, snapshotName, applied); err != nil {
				return err
			}
		case "30-restore.yaml":
			if _, err := waitBound(ctx, env, restoreClaim, applied); err != nil {
				return err
			}
		case "40-schedule.yaml":
			if err := waitScheduled(ctx, env, scheduleName); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitBound waits until the claim is Bound to the volume csi-provisioner
// created for it, and prints both with the time since applied.
func waitBound(ctx context.Context, env *framework.Env, claim string, applied time.Time) (*corev1.PersistentVolume, error) {
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	err := framework.PollContext(ctx, bindTimeout, "claim "+namespace+"/"+claim+" Bound", func() error {
		var err error
		pvc, pv, err = env.BoundClaim(ctx, namespace, claim)
		return err
	})
	if err != nil {
		return nil, err
	}
	handle := ""
	if pv.Spec.CSI != nil {
		handle = ", volume handle " + pv.Spec.CSI.VolumeHandle
	}
	size := pvc.Status.Capacity[corev1.ResourceStorage]
	fmt.Printf("    claim %s/%s Bound to %s (%s, provisioned by %s%s) within %s of kubectl apply\n",
		namespace, claim, pv.Name, size.String(), pv.Annotations["pv.kubernetes.io/provisioned-by"],
		handle, time.Since(applied).Round(10*time.Millisecond))
	return pv, nil
}

// waitReady waits until the snapshot is readyToUse and prints it with the
// time since applied.
func waitReady(ctx context.Context, env *framework.Env, name string, applied time.Time) error {
	var restore string
	err := framework.PollContext(ctx, readyTimeout, "snapshot "+namespace+"/"+name+" ready", func() error {
		vs, err := env.Snap.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vs.Status == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse {
			if vs.Status != nil && vs.Status.Error != nil && vs.Status.Error.Message != nil {
				return fmt.Errorf("not ready: %s", *vs.Status.Error.Message)
			}
			return fmt.Errorf("not ready yet")
		}
		restore = "unset"
		if vs.Status.RestoreSize != nil {
			restore = vs.Status.RestoreSize.String()
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("    snapshot %s/%s ready (restoreSize %s) within %s of kubectl apply\n",
		namespace, name, restore, time.Since(applied).Round(10*time.Millisecond))
	return nil
}

// waitScheduled waits until the schedule component has looked at the
// schedule (its status names the next run) and prints when it runs.
func waitScheduled(ctx context.Context, env *framework.Env, name string) error {
	var next string
	err := framework.PollContext(ctx, readyTimeout, "schedule "+namespace+"/"+name+" scheduled", func() error {
		s, err := env.Dynamic.Resource(v1alpha1.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next, _, err = unstructured.NestedString(s.Object, "status", "nextScheduleTime")
		if err == nil && next == "" {
			err = fmt.Errorf("no status.nextScheduleTime yet")
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("    schedule %s/%s runs next at %s, then every minute\n", namespace, name, next)
	return nil
}

func exited(procs ...*framework.Process) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			for _, p := range procs {
				if p != nil && p.Exited() {
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
