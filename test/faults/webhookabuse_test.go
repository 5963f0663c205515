package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/memlimit"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// abuseSizes are the hostile clients of one run of TestWebhookAbuse.
type abuseSizes struct {
	SlowHeaders, SlowBodies int // slowloris and slow-body connections (slow bodies over HTTP/1.1 and HTTP/2 each)
	IdleTCP, IdleTLS        int // connections that send nothing, before and after the handshake (HTTP/1.1 and HTTP/2 each)
	KeepAlive               int // connections left idle after one request (IdleTimeout, 90 s)
	Oversized, Malformed    int // rounds of each oversized request, passes over the malformed table
	LargeBodies             int // 6 MiB bodies at once (webhookmemory_test.go)
}

func abuseRunSizes() abuseSizes {
	if runSizes().full {
		return abuseSizes{SlowHeaders: 200, SlowBodies: 200, IdleTCP: 1000, IdleTLS: 1000, KeepAlive: 200, Oversized: 10, Malformed: 10, LargeBodies: 40}
	}
	return abuseSizes{SlowHeaders: 20, SlowBodies: 20, IdleTCP: 100, IdleTLS: 100, Oversized: 1, Malformed: 1, LargeBodies: 40}
}

// TestWebhookAbuse points hostile and malformed clients at the real webhook
// binary over TLS, all at once: slowloris (headers a byte at a time), slow
// bodies (HTTP/1.1 and HTTP/2), connections that never send a byte (before
// and after the TLS handshake, HTTP/1.1 and HTTP/2), oversized bodies and
// headers, many large bodies at once, malformed requests. The threat:
// anything in the cluster can reach the webhook's port, and a webhook that
// stops answering blocks every snapshot write (failurePolicy Fail). Every
// hostile connection must be cut off by the server's timeouts
// (pkg/admission/server.go) or refused with a clear error, while a
// well-behaved client, straight to the webhook and through the API server,
// gets the right verdict every time: 0 failed requests. Many large bodies
// at once, sent first and alone, must leave the webhook's resident size
// under the chart's memory limit (webhookmemory_test.go), and so must the
// whole attack, which also holds thousands of connections open.
func TestWebhookAbuse(t *testing.T) {
	_ = newRand(t) // logs how to replay; the scenario draws nothing at random
	sz := abuseRunSizes()
	env := framework.Shared(t)
	// The chart gives the webhook its container's memory limit
	// (SNAPKEEPER_MEMORY_LIMIT from limits.memory), from which it sets Go's
	// soft memory limit (pkg/memlimit); the process started here inherits it.
	t.Setenv(memlimit.EnvVar, strconv.Itoa(chartWebhookMemoryLimit))
	wh := env.StartWebhook(t)
	pid := wh.Proc.Pid()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, err := wh.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := base.Sum("go_gc_gomemlimit_bytes"), float64(memlimit.Soft(chartWebhookMemoryLimit)); got != want {
		t.Errorf("the webhook's Go memory limit is %v bytes, want %v (%v of %s=%d)", got, want, memlimit.Ratio, memlimit.EnvVar, chartWebhookMemoryLimit)
	}
	good := &wellBehaved{}
	goodDone := good.run(ctx, env, wh, 2)
	time.Sleep(time.Second) // the good client is under way before the attack
	start := time.Now()
	hostile := newHostile(wh)
	largeBodiesAlone(ctx, t, wh, hostile, sz.LargeBodies)
	rss := watchRSS(ctx, pid)
	var mu sync.Mutex
	var cuts []cut
	record := func(c cut) {
		mu.Lock()
		defer mu.Unlock()
		cuts = append(cuts, c)
	}
	var attack sync.WaitGroup
	launch := func(n int, f func(context.Context) cut) {
		for range n {
			attack.Add(1)
			go func() {
				defer attack.Done()
				record(f(ctx))
			}()
		}
	}
	launch(sz.SlowHeaders, hostile.slowHeaders)
	launch(sz.SlowBodies, hostile.slowBody)
	launch(sz.IdleTCP, hostile.idleTCP)
	launch(sz.IdleTLS, hostile.idleTLS)
	launch(sz.IdleTLS, hostile.idleH2)
	launch(sz.SlowBodies, hostile.slowBodyH2)
	launch(sz.KeepAlive, hostile.idleAfterRequest)
	launch(sz.Oversized, hostile.declaredTooLarge)
	launch(sz.Oversized, hostile.chunkedTooLarge)
	launch(sz.Oversized, hostile.headersTooLarge)
	launch(sz.LargeBodies, hostile.largeBody)
	var malformed []malformedResult
	for range sz.Malformed {
		malformed = append(malformed, hostile.malformed(ctx, t)...)
	}
	attack.Wait()
	attackTime := time.Since(start)
	time.Sleep(time.Second) // the good client keeps going after the attack
	cancel()
	goodDone.Wait()

	reportCuts(t, cuts)
	reportMalformed(t, malformed)
	t.Logf("well-behaved client during %v of attack: %d reviews straight to the webhook (a new TLS connection each), "+
		"%d dry-run creates through the API server, %d failed, slowest %v",
		attackTime.Round(time.Millisecond), good.direct.Load(), good.viaAPI.Load(), good.failed.Load(), good.slowest().Round(time.Millisecond))
	for _, e := range good.firstErrors() {
		t.Errorf("well-behaved request failed: %s", e)
	}
	if good.direct.Load() == 0 || good.viaAPI.Load() == 0 {
		t.Errorf("the well-behaved client sent nothing (%d direct, %d through the API server)", good.direct.Load(), good.viaAPI.Load())
	}
	if wh.Proc.Exited() || wh.Proc.Pid() != pid {
		t.Fatalf("the webhook exited during the attack:\n%s", wh.Proc.Tail(3000))
	}
	settled(t, wh, base, rss)
}

// settled checks that the webhook let go of the hostile connections: its
// goroutines come back to what they were before the attack.
func settled(t *testing.T, wh *framework.Webhook, base framework.Samples, rss *rssWatch) {
	t.Helper()
	ctx := context.Background()
	before := base.Sum("go_goroutines")
	var after float64
	err := framework.Poll(30*time.Second, "the webhook's goroutines to come back down", func() (bool, error) {
		s, err := wh.Scrape(ctx)
		if err != nil {
			return false, err
		}
		after = s.Sum("go_goroutines")
		return after <= before+10, fmt.Errorf("%v goroutines, %v before the attack", after, before)
	})
	if err != nil {
		t.Error(err)
	}
	first, peak := rss.stop()
	t.Logf("webhook: same process throughout; goroutines %v before the attack, %v after; RSS %d MiB before the combined attack, "+
		"%d MiB at most during it (the chart's limit: %d MiB)", before, after, first>>20, peak>>20, chartWebhookMemoryLimit>>20)
	if peak >= chartWebhookMemoryLimit {
		t.Errorf("the attack took the webhook's resident size to %d MiB, past the chart's memory limit of %d MiB: a pod would be OOM-killed",
			peak>>20, chartWebhookMemoryLimit>>20)
	}
}

// wellBehaved is the client that must keep being served: class reviews
// straight to the webhook, each over a new TLS connection (so each goes
// through accept and the handshake next to the hostile connections), and
// dry-run class creates through the API server. A valid class must be
// admitted and an invalid one denied with its message, every time.
type wellBehaved struct {
	direct, viaAPI, failed atomic.Int64
	mu                     sync.Mutex
	errs                   []string
	worst                  time.Duration
}

const (
	goodDriver = "good.csi.snapkeeper.io"
	badDriver  = "not a driver!"
	badMessage = `has an invalid driver "not a driver!"`
)

// run starts workers goroutines of each kind until ctx ends.
func (g *wellBehaved) run(ctx context.Context, env *framework.Env, wh *framework.Webhook, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	hc := wh.Client()
	hc.Transport.(*http.Transport).DisableKeepAlives = true
	for w := range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				g.note(ctx, &g.direct, func() error { return reviewOnce(ctx, hc, wh, fmt.Sprintf("good-%d-%d", w, i), i%2 == 1) })
				time.Sleep(20 * time.Millisecond)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				g.note(ctx, &g.viaAPI, func() error { return dryRunOnce(ctx, env, fmt.Sprintf("good-api-%d-%d", w, i), i%2 == 1) })
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return &wg
}

// note runs one request and counts it; a request cut short by the end of
// the run is not counted.
func (g *wellBehaved) note(ctx context.Context, n *atomic.Int64, req func() error) {
	start := time.Now()
	err := req()
	if ctx.Err() != nil {
		return
	}
	n.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.worst = max(g.worst, time.Since(start))
	if err != nil {
		g.failed.Add(1)
		if len(g.errs) < 10 {
			g.errs = append(g.errs, err.Error())
		}
	}
}

func (g *wellBehaved) slowest() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.worst
}

func (g *wellBehaved) firstErrors() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.errs)
}

// reviewOnce sends one class review straight to the webhook and checks
// the verdict.
func reviewOnce(ctx context.Context, hc *http.Client, wh *framework.Webhook, name string, invalid bool) error {
	driver := goodDriver
	if invalid {
		driver = badDriver
	}
	r, err := framework.ReviewClass(ctx, hc, wh.Addr, types.UID("uid-"+name), framework.SnapshotClass(name, driver, snapv1.VolumeSnapshotContentDelete, false))
	if err != nil {
		return err
	}
	switch {
	case string(r.UID) != "uid-"+name:
		return fmt.Errorf("review of %s: answered with UID %q", name, r.UID)
	case !invalid && !r.Allowed:
		return fmt.Errorf("valid class %s denied: %+v", name, r.Result)
	case invalid && (r.Allowed || r.Result == nil || r.Result.Code != http.StatusForbidden || !strings.Contains(r.Result.Message, badMessage)):
		return fmt.Errorf("invalid class %s: allowed %v, result %+v; want 403 %q", name, r.Allowed, r.Result, badMessage)
	}
	return nil
}

// dryRunOnce creates a class through the API server (dry run) and checks
// the verdict the webhook gave.
func dryRunOnce(ctx context.Context, env *framework.Env, name string, invalid bool) error {
	driver := goodDriver
	if invalid {
		driver = badDriver
	}
	c := framework.SnapshotClass(name, driver, snapv1.VolumeSnapshotContentDelete, false)
	_, err := env.Snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case !invalid && err != nil:
		return fmt.Errorf("dry-run create of valid class %s: %w", name, err)
	case invalid && (err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), badMessage)):
		return fmt.Errorf("dry-run create of invalid class %s: %v; want the webhook's denial %q", name, err, badMessage)
	}
	return nil
}
