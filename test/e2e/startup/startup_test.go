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
	expectFailure(t, p, 30*time.Second, "without CRDs", "snapshot CRDs", "install them")
}

func TestRefusesADriverThatCannotSnapshot(t *testing.T) {
	env := framework.Shared(t)
	if err := framework.InstallCRDs(context.Background(), env.Dynamic, framework.CRDDir()); err != nil {
		t.Fatal(err)
	}
	drv := env.StartCSIDriver(t, framework.CSIDriverOptions{DriverName: "nosnap.csi.snapkeeper.io",
		HideCapabilities: []string{"CREATE_DELETE_SNAPSHOT"}})
	p := startRaw(t, env, "--csi-address="+drv.Socket, "--timeout=5s")
	expectFailure(t, p, 60*time.Second, "with a driver that cannot snapshot", "CREATE_DELETE_SNAPSHOT", "nosnap.csi.snapkeeper.io")
}

// expectFailure waits up to timeout for controller p to exit, which it
// must do with an error (why says in which case), and checks that the end
// of its log has every one of wants: the message a user needs.
func expectFailure(t *testing.T, p *framework.Process, timeout time.Duration, why string, wants ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.Wait(ctx); err == nil {
		t.Fatalf("controller exited 0 %s", why)
	}
	log := p.Tail(4000)
	for _, want := range wants {
		if !strings.Contains(log, want) {
			t.Fatalf("message %s lacks %q:\n%s", why, want, log)
		}
	}
}
