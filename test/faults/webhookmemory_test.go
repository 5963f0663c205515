package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// chartWebhookMemoryLimit is the webhook's memory limit in the chart
// (charts/snapkeeper/values.yaml, webhook.resources.limits.memory): the
// resident size the hostile clients must not push it past, or a pod would
// be OOM-killed and every snapshot write refused until it is back.
const chartWebhookMemoryLimit = 256 << 20

// largeBody sends a 6 MiB body (under --max-request-bytes, 7 MiB) at full
// speed, many at once: each is held in memory until answered, so together
// they once took the webhook to 458 MiB. The webhook reads as many as its
// budget of bytes held at once allows (and answers them 400: filler is not
// a review) and refuses the others with 429.
func (h *hostile) largeBody(ctx context.Context) cut {
	c := cut{kind: "6 MiB body at full speed, many at once", want: []int{http.StatusBadRequest, http.StatusTooManyRequests}}
	return h.exchange(ctx, c, hostileHead+fmt.Sprintf("Content-Length: %d\r\n\r\n", 6<<20), bulk(6<<20, false))
}

// largeBodiesAlone sends n large bodies at once, with nothing else but the
// well-behaved client going on: the webhook's resident size must stay
// under the chart's memory limit (40 of them took it to 617 MiB before it
// bounded the body bytes it holds at once, pkg/admission/budget.go).
func largeBodiesAlone(ctx context.Context, t *testing.T, wh *framework.Webhook, h *hostile, n int) {
	t.Helper()
	rss := watchRSS(ctx, wh.Proc.Pid())
	cuts := make([]cut, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cuts[i] = h.largeBody(ctx)
			cuts[i].kind += ", alone"
		}()
	}
	wg.Wait()
	first, peak := rss.stop()
	reportCuts(t, cuts)
	t.Logf("%d large bodies alone: webhook RSS %d MiB before, %d MiB at most (the chart's limit: %d MiB)",
		n, first>>20, peak>>20, chartWebhookMemoryLimit>>20)
	if peak >= chartWebhookMemoryLimit {
		t.Errorf("%d large bodies at once took the webhook's resident size to %d MiB, past the chart's memory limit of %d MiB: a pod would be OOM-killed",
			n, peak>>20, chartWebhookMemoryLimit>>20)
	}
}

// rssWatch follows the resident memory of a process: the kernel's peak
// (VmHWM, reset when the watch starts) and samples every 100 ms, in case
// the reset is not allowed.
type rssWatch struct {
	mu          sync.Mutex
	pid         int
	first, peak int64
	hwmReset    bool
	done        chan struct{}
}

func watchRSS(ctx context.Context, pid int) *rssWatch {
	w := &rssWatch{done: make(chan struct{}), pid: pid, first: readRSS(pid)}
	w.peak = w.first
	// "5" resets the peak resident size to the current one (proc(5),
	// /proc/<pid>/clear_refs).
	w.hwmReset = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.done:
				return
			case <-tick.C:
				v := readRSS(pid)
				w.mu.Lock()
				w.peak = max(w.peak, v)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *rssWatch) stop() (first, peak int64) {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hwmReset {
		w.peak = max(w.peak, procStatus(w.pid, "VmHWM:"))
	}
	return w.first, w.peak
}

// readRSS is VmRSS of /proc/<pid>/status in bytes, 0 if unreadable.
func readRSS(pid int) int64 { return procStatus(pid, "VmRSS:") }

// procStatus is a size field of /proc/<pid>/status in bytes, 0 if
// unreadable.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}
