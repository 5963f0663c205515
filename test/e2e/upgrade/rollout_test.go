package upgrade

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The kubelet's grace before SIGKILL: the chart's
// terminationGracePeriodSeconds.
const terminationGrace = 30 * time.Second

// swapped is the new release's processes and what was recorded at the
// swap.
type swapped struct {
	stack   *stack
	started time.Time // the first new process started
	logSeq  int64     // the driver's call log before the swap
	writes  framework.APIWrites
	// The new replicas' Lease holder identities when they took over.
	binderHolder, csiHolder string
}

// rollOut swaps every process to cur the way a rolling update does: for
// each Deployment the new replica starts, then the old one gets SIGTERM
// (the binder and the CSI side wait for their Lease; the old one releases
// it on exit). Between the CSI side and the webhook, a quiet window: with
// the in-flight snapshots held by the driver, nothing may be written.
func (c *cluster) rollOut(t *testing.T, old *stack, cur *build, w *workload, fig *figures) *swapped {
	t.Helper()
	sw := &swapped{stack: &stack{version: cur.Version}, logSeq: c.drv.CallLog(t, 0).Last, writes: c.writes(t)}
	sw.started = time.Now()
	r := c.rollController(t, old.binder, c.ns, binderLease, func() *framework.Component {
		return c.startController(t, cur, c.ns, binderDeployment, "controller", binderDeployment+"-new")
	})
	sw.stack.binder, fig.BinderHandover, fig.OldStop[1] = r.next, r.handover, r.stopped
	sw.binderHolder = c.leaseHolder(t.Context(), c.ns, binderLease)
	c.stillInFlight(t, w)
	r = c.rollController(t, old.csi, c.drvNS, csiLease, func() *framework.Component {
		nu := c.startController(t, cur, c.drvNS, csiDeployment, "snapkeeper-csi-side", csiDeployment+"-new")
		// The old side's calls stay held until it exits; the new side's
		// are held holdNew, so that the quiet window sees nothing finish.
		c.drv.SetFaults(t, framework.Faults{Rules: []framework.FaultRule{notReady, {Method: "CreateSnapshot", Hang: csitest.Duration(holdNew)}}})
		return nu
	})
	sw.stack.csi, fig.CSIHandover, fig.OldStop[2] = r.next, r.handover, r.stopped
	sw.csiHolder = c.leaseHolder(t.Context(), c.drvNS, csiLease)

	time.Sleep(time.Second)
	w0, s0 := c.writes(t), c.read(t)
	time.Sleep(quiet)
	w1, s1 := c.writes(t), c.read(t)
	fig.QuietWrites = contractOnly(w1.Sub(w0))
	if ch := s1.changedSince(s0); len(ch) > 0 || len(fig.QuietWrites) > 0 {
		t.Errorf("snapshot objects written in the quiet window after the swap (writes: %s):\n  %s", fig.QuietWrites, strings.Join(ch, "\n  "))
	}

	p := startProbe(c.env, 20*time.Millisecond)
	sw.stack.webhook, sw.stack.webhookAddr, fig.OldStop[0] = c.rollWebhook(t, old, cur)
	time.Sleep(2 * time.Second) // the probe goes on with the new webhook alone
	fig.Webhook = p.stop()
	t.Logf("webhook swap: %s", fig.Webhook)
	if fig.Webhook.Admitted > 0 {
		t.Errorf("%d requests were admitted without being judged during the webhook swap", fig.Webhook.Admitted)
	}
	// docs/releases.md: with the new replica ready and in the Service
	// before the old one leaves it, no request is refused.
	if fig.Webhook.Refused > 0 {
		t.Errorf("the webhook swap refused requests: %s", fig.Webhook)
	}
	return sw
}

// roll is one controller replica replaced by another.
type roll struct {
	next *framework.Component
	// stopped: from SIGTERM to the old replica's exit; handover: from
	// SIGTERM until the new one held the Lease and was ready.
	stopped, handover time.Duration
	// released: the Lease had no holder right after the old replica
	// exited (it gave the Lease up instead of leaving it to expire).
	released bool
}

// rollController starts the new replica (it waits for the Lease), stops
// the old one as the kubelet would, and waits until the new one leads.
func (c *cluster) rollController(t *testing.T, old *framework.Component, ns, lease string, start func() *framework.Component) roll {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	oldHolder := c.leaseHolder(ctx, ns, lease)
	if oldHolder == "" {
		t.Fatalf("nobody holds the Lease %s/%s before the swap", ns, lease)
	}
	r := roll{next: start()}
	if h := c.leaseHolder(ctx, ns, lease); h != oldHolder {
		t.Fatalf("the Lease %s/%s moved from %s to %s while the old replica ran", ns, lease, oldHolder, h)
	}
	t0 := time.Now()
	old.Proc.Stop(terminationGrace)
	r.stopped = time.Since(t0)
	r.released = c.leaseHolder(ctx, ns, lease) != oldHolder
	if err := old.Proc.Wait(ctx); err != nil {
		t.Logf("%s exited with %v after SIGTERM", old.Name, err)
	}
	framework.Eventually(t, time.Minute, "the new "+old.Name+" replica to take the Lease and be ready", func() (bool, error) {
		if r.next.Proc.Exited() {
			t.Fatalf("%s exited:\n%s", r.next.Name, r.next.Proc.Tail(4000))
		}
		h := c.leaseHolder(ctx, ns, lease)
		if h == "" || h == oldHolder {
			return false, fmt.Errorf("Lease holder %q", h)
		}
		return true, framework.HTTPOK("http://" + r.next.HTTPAddr + "/readyz")
	})
	r.handover = time.Since(t0)
	t.Logf("%s: old replica exited %s after SIGTERM (Lease released: %v), new one led and was ready %s after the SIGTERM",
		lease, r.stopped.Round(time.Millisecond), r.released, r.handover.Round(time.Millisecond))
	return r
}

// rollAgain replaces this tree's binder by another replica of it, as the
// next upgrade will: the old replica must give its Lease up on SIGTERM
// (cmd/controller/leaderguard.go), so the new one leads within its retry
// period instead of a lease duration.
func (c *cluster) rollAgain(t *testing.T, sw *swapped, cur *build, fig *figures) {
	t.Helper()
	r := c.rollController(t, sw.stack.binder, c.ns, binderLease, func() *framework.Component {
		return c.startController(t, cur, c.ns, binderDeployment, "controller", binderDeployment+"-again")
	})
	sw.stack.binder, fig.AgainHandover = r.next, r.handover
	if !r.released {
		t.Errorf("this tree's binder left its Lease to expire on SIGTERM instead of releasing it")
	}
}

// rollWebhook starts the new webhook, adds it to the Service, then takes
// the old one out of the Service and sends it SIGTERM at the same moment
// (the endpoints controller and the kubelet both act on the pod's
// deletion).
func (c *cluster) rollWebhook(t *testing.T, old *stack, cur *build) (*framework.Process, string, time.Duration) {
	t.Helper()
	proc, addr := c.startWebhook(t, cur, webhookDeployment+"-new")
	c.svc.SetEndpoints(old.webhookAddr, addr)
	time.Sleep(time.Second) // both serve
	c.svc.SetEndpoints(addr)
	t0 := time.Now()
	old.webhook.Stop(terminationGrace)
	return proc, addr, time.Since(t0)
}

// finish releases the driver: the in-flight snapshots must become ready
// under the names they were cut with, nothing ready may have been cut or
// written again, and the backend must hold exactly what the contents name.
func (c *cluster) finish(t *testing.T, w *workload, sw *swapped, fig *figures) {
	t.Helper()
	t0 := time.Now()
	c.drv.SetFaults(t, framework.Faults{})
	s := c.waitFor(t, w.inflight, 2*time.Minute, "the in-flight snapshots to be ready under the new release", (*state).ready)
	fig.FinishInFlight = time.Since(t0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wq, err := c.env.WaitQuietWrites(ctx, contract, time.Second, 30*time.Second)
	if err != nil {
		t.Error(err)
	}
	fig.SwapWrites = contractOnly(wq.Sub(sw.writes))
	for k := range fig.SwapWrites {
		if k.Resource == "volumesnapshotclasses" {
			delete(fig.SwapWrites, k) // the webhook probe's dry runs
		}
	}

	recuts, creates := c.recutsSince(t, sw.logSeq, w.done)
	if len(recuts) > 0 {
		t.Errorf("the new release cut again what was ready before the upgrade: %v", recuts)
	}
	backend := c.backendByName(t)
	for name, n := range backend {
		if n > 1 {
			t.Errorf("the backend holds %d snapshots named %s: a duplicate cut", n, name)
		}
	}
	for _, n := range w.inflight {
		if name := csiName(s.snaps[n]); backend[name] != 1 {
			t.Errorf("%s finished, but the backend holds %d snapshots named %s", n, backend[name], name)
		}
	}
	t.Logf("create calls after the swap (name: calls): %v", creates)
	if ch := c.read(t).changedSince(w.before); len(ch) > 0 {
		t.Errorf("objects that were ready before the upgrade were written since:\n  %s", strings.Join(ch, "\n  "))
	}
	c.env.WaitBackendMatchesContents(t, c.drv)
	c.env.WaitBackendGroupsMatchGroupContents(t, c.drv)
}

// checkStable: the new processes have run for `stable` without exiting,
// are ready, still hold the Leases they took (no restart, no loss),
// report the new version, and were refused nothing by the chart's RBAC.
func (c *cluster) checkStable(t *testing.T, sw *swapped) {
	t.Helper()
	time.Sleep(time.Until(sw.started.Add(stable)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := sw.stack
	for _, comp := range []*framework.Component{st.binder, st.csi} {
		if comp.Proc.Exited() {
			t.Fatalf("%s exited:\n%s", comp.Name, comp.Proc.Tail(4000))
		}
		if err := comp.WaitReady(10 * time.Second); err != nil {
			t.Error(err)
		}
		if v, err := comp.Metric(ctx, "snapkeeper_build_info", `version="`+st.version+`"`); err != nil || v != 1 {
			t.Errorf("%s: snapkeeper_build_info{version=%q} = %v, %v; want 1", comp.Name, st.version, v, err)
		}
	}
	for _, l := range []struct{ ns, name, holder string }{
		{c.ns, binderLease, sw.binderHolder}, {c.drvNS, csiLease, sw.csiHolder},
	} {
		if h := c.leaseHolder(ctx, l.ns, l.name); h != l.holder {
			t.Errorf("Lease %s/%s is held by %q, want the new replica's %q since it took over", l.ns, l.name, h, l.holder)
		}
	}
	if st.webhook.Exited() {
		t.Fatalf("%s exited:\n%s", st.webhook.Name, st.webhook.Tail(4000))
	}
	if err := framework.HTTPOK("https://" + st.webhookAddr + "/readyz"); err != nil {
		t.Error(err)
	}
	if o, err := judge(ctx, c.env); o != judged {
		t.Errorf("the new webhook does not judge: %v", err)
	}
	for _, p := range []*framework.Process{st.webhook, st.binder.Proc, st.csi.Proc} {
		for _, line := range strings.Split(p.Tail(1<<20), "\n") {
			if strings.Contains(line, "forbidden") {
				t.Errorf("%s was refused something: %s", p.Name, line)
			}
		}
	}
}

func (c *cluster) writes(t *testing.T) framework.APIWrites {
	t.Helper()
	return framework.Must(t, c.env.APIWrites)
}

// contractOnly keeps the writes on snapshot objects and claims.
func contractOnly(w framework.APIWrites) framework.APIWrites {
	out := framework.APIWrites{}
	for k, v := range w {
		if contract(k) {
			out[k] = v
		}
	}
	return out
}
