package dropin

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// foreignHolder is how a community snapshot-controller pod names itself in
// the Lease: its pod name.
const foreignHolder = "snapshot-controller-6b8f5d4c7-q2wxz"

// foreignLease creates the binder's Lease in ns as a community controller
// holds it: fresh, renewed a moment ago, for a minute.
func foreignLease(t *testing.T, env *framework.Env, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := metav1.NowMicro()
	duration := int32(60)
	holder := foreignHolder
	_, err := env.Kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snapshot-controller-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration,
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// Without leader election, our binder refuses to start next to a
// community controller that holds the Lease, and says who and what to do;
// --force-despite-foreign-leader overrides.
func TestForeignLeaseHolderStopsABinderWithoutLeaderElection(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	foreignLease(t, env, ns)
	base := []string{"--kubeconfig=" + env.Kubeconfig, "--components=binder", "--leader-election-namespace=" + ns}

	p := startOwn(t, env, "refused", base)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Wait(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("want a non-zero exit, got %v", err)
	}
	log := p.Tail(20000)
	for _, want := range []string{foreignHolder, ns + "/snapshot-controller-leader", "--force-despite-foreign-leader", "--leader-election", "scale the other controller down"} {
		if !strings.Contains(log, want) {
			t.Errorf("the refusal does not mention %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "Binder started") {
		t.Error("the binder worked before refusing")
	}

	addr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	forced := startOwn(t, env, "forced", append(base, "--force-despite-foreign-leader", "--http-endpoint="+addr))
	if err := (&framework.Component{Name: "forced", HTTPAddr: addr, Proc: forced}).WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the forced binder to start and warn", func() (bool, error) {
		log := forced.Tail(1 << 20)
		return strings.Contains(log, "Binder started") && strings.Contains(log, foreignHolder), nil
	})
}

// With leader election, our binder warns about the community holder and
// waits like any candidate; it takes over once the Lease is released.
func TestForeignLeaseHolderIsWaitedForWithLeaderElection(t *testing.T) {
	env := framework.Shared(t)
	ns := env.Namespace(t)
	foreignLease(t, env, ns)
	addr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startOwn(t, env, "candidate", []string{"--kubeconfig=" + env.Kubeconfig, "--components=binder",
		"--leader-election", "--leader-election-namespace=" + ns, "--leader-election-retry-period=1s", "--http-endpoint=" + addr})
	framework.Eventually(t, 30*time.Second, "a warning naming the holder", func() (bool, error) {
		log := p.Tail(1 << 20)
		return strings.Contains(log, foreignHolder) && strings.Contains(log, "Waiting for it to release the Lease"), nil
	})
	time.Sleep(3 * time.Second)
	if log := p.Tail(1 << 20); strings.Contains(log, "Binder started") || p.Exited() {
		t.Fatalf("the binder did not wait for the Lease:\n%s", log)
	}

	// The community controller stops and releases the Lease, as it does on
	// a clean shutdown.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leases := env.Kube.CoordinationV1().Leases(ns)
	l, err := leases.Get(ctx, "snapshot-controller-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	l.Spec.HolderIdentity = &empty
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "our binder to take the Lease over", func() (bool, error) {
		l, err := leases.Get(ctx, "snapshot-controller-leader", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.HolderIdentity != nil && strings.Contains(*l.Spec.HolderIdentity, "_snapkeeper_") &&
			strings.Contains(p.Tail(1<<20), "Binder started"), nil
	})
	// The leader election metric Kubernetes components expose says so.
	c := &framework.Component{Name: "candidate", HTTPAddr: addr, Proc: p}
	framework.Eventually(t, 10*time.Second, "leader_election_master_status 1", func() (bool, error) {
		v, err := c.Metric(ctx, "leader_election_master_status", `name="snapshot-controller-leader"`)
		return v == 1, err
	})
}
