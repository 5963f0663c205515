// Package startup checks how the controller starts: waiting for the
// snapshot CRDs, and refusing a driver that cannot snapshot.
package startup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// A control plane of its own, without the CRDs.
func bareControlPlane(t *testing.T) *framework.Env {
	t.Helper()
	dir := t.TempDir()
	cp, err := framework.StartControlPlane(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	env, err := framework.NewEnv(cp)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func startRaw(t *testing.T, env *framework.Env, args ...string) *framework.Process {
	t.Helper()
	bin, err := framework.OwnBinary("./cmd/controller")
	if err != nil {
		t.Fatal(err)
	}
	p, err := framework.StartProcess(t.TempDir(), "controller", bin, append([]string{"--kubeconfig=" + env.Kubeconfig}, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

func TestWaitsForTheCRDsThenRuns(t *testing.T) {
	env := bareControlPlane(t)
	p := startRaw(t, env, "--components=binder", "--retry-crd-interval-max=500ms", "--crd-wait-timeout=2m")
	time.Sleep(2 * time.Second)
	if p.Exited() {
		t.Fatalf("controller gave up at once:\n%s", p.Tail(2000))
	}
	if !strings.Contains(p.Tail(20000), "Waiting for the snapshot CRDs") {
		t.Fatalf("controller does not say what it waits for:\n%s", p.Tail(2000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := framework.InstallCRDs(ctx, env.Dynamic, framework.CRDDir()); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "binder started", func() (bool, error) {
		return strings.Contains(p.Tail(20000), "Binder started"), nil
	})
	if p.Exited() {
		t.Fatalf("controller exited:\n%s", p.Tail(2000))
	}
}

func TestGivesUpWithAClearMessageWithoutCRDs(t *testing.T) {
	env := bareControlPlane(t)
	p := startRaw(t, env, "--components=binder", "--retry-crd-interval-max=200ms", "--crd-wait-timeout=2s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err == nil {
		t.Fatal("controller exited 0 without CRDs")
	}
	if log := p.Tail(4000); !strings.Contains(log, "snapshot CRDs") || !strings.Contains(log, "install them") {
		t.Fatalf("no clear message:\n%s", log)
	}
}

func TestRefusesADriverThatCannotSnapshot(t *testing.T) {
	env := framework.Shared(t)
	if err := framework.InstallCRDs(context.Background(), env.Dynamic, framework.CRDDir()); err != nil {
		t.Fatal(err)
	}
	drv := env.StartCSIDriver(t, framework.CSIDriverOptions{DriverName: "nosnap.csi.snapkeeper.io",
		HideCapabilities: []string{"CREATE_DELETE_SNAPSHOT"}})
	p := startRaw(t, env, "--csi-address="+drv.Socket, "--timeout=5s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err == nil {
		t.Fatal("controller ran with a driver that cannot snapshot")
	}
	if log := p.Tail(4000); !strings.Contains(log, "CREATE_DELETE_SNAPSHOT") || !strings.Contains(log, "nosnap.csi.snapkeeper.io") {
		t.Fatalf("message does not name the driver and the capability:\n%s", log)
	}
}
