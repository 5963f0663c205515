package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Where a phase's time goes. Our controllers export the time each key
// waits in a work loop's queue and spends in its sync, the round trip of
// every API request and of every CSI call, the time from a write's answer
// until the component's informer shows it (the watch round trip) and the
// backoff of failed syncs; the API server exports how long it took to
// serve writes and how long API Priority and Fairness queued requests. The
// benchmark scrapes the sums of those histograms at both ends of a phase:
// their differences, divided by the snapshots of the phase, are where an
// average snapshot's trip spent its time. Sums add up concurrent waits
// (64 keys waiting 1 s each is 64 s), so a row is a share of the work,
// not a part of the wall time. The machine's and each process's CPU over
// the phase (until all-ready) say whether anything was idle.

// waitSums are histogram sums (and counts) by row key.
type waitSums map[string]float64

// ourWaitMetrics are the histograms of our controllers read per process,
// with the label that splits them.
var ourWaitMetrics = []struct{ name, label string }{
	{"workqueue_queue_duration_seconds", "name"},
	{"workqueue_work_duration_seconds", "name"},
	{"rest_client_request_duration_seconds", "verb"},
	{"rest_client_rate_limiter_duration_seconds", "verb"},
	{"snapkeeper_watch_delay_seconds", ""},
	{"csi_sidecar_operations_seconds", "method_name"},
	{"snapkeeper_retry_backoff_seconds", "loop"},
}

// scrapeOurWaits reads the sums and counts of ourWaitMetrics from each of
// our processes, keyed "process metric label", e.g.
// "snapkeeper-binder workqueue_queue_duration_seconds_sum snapshot-controller-snapshot".
func scrapeOurWaits(ctx context.Context, r *running) (waitSums, error) {
	out := waitSums{}
	if r == nil {
		return out, nil
	}
	for _, c := range r.ours {
		body, err := fetchMetrics(ctx, c.HTTPAddr)
		if err != nil {
			return nil, err
		}
		for _, m := range ourWaitMetrics {
			for _, suffix := range []string{"_sum", "_count"} {
				err := framework.EachSample(bytes.NewReader(body), m.name+suffix, func(l map[string]string, v float64) {
					out[c.Name+" "+m.name+suffix+" "+l[m.label]] += v
				})
				if err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

func fetchMetrics(ctx context.Context, addr string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// scrapeAPIWaits reads the API server's time serving writes and the time
// API Priority and Fairness held requests in its queues.
func (a *apiServer) scrapeAPIWaits(ctx context.Context) (waitSums, error) {
	body, err := a.scrape(ctx)
	if err != nil {
		return nil, err
	}
	out := waitSums{}
	for _, suffix := range []string{"_sum", "_count"} {
		// Writes summed, and every verb per resource (long-running WATCHes
		// excluded); below, the API server's requests to etcd per operation
		// and type: whether one request costs more as the store grows.
		err := framework.EachSample(bytes.NewReader(body), "apiserver_request_duration_seconds"+suffix, func(l map[string]string, v float64) {
			if ignoredResources[l["resource"]] {
				return
			}
			if writeVerbs[l["verb"]] {
				out["apiserver write"+suffix] += v
			}
			if l["verb"] != "WATCH" && l["verb"] != "CONNECT" {
				out[apiOpKey(l["verb"], l["resource"], l["subresource"])+suffix] += v
			}
		})
		if err != nil {
			return nil, err
		}
		err = framework.EachSample(bytes.NewReader(body), "etcd_request_duration_seconds"+suffix, func(l map[string]string, v float64) {
			out["etcd "+l["operation"]+" "+l["type"]+suffix] += v
		})
		if err != nil {
			return nil, err
		}
		err = framework.EachSample(bytes.NewReader(body), "apiserver_flowcontrol_request_wait_duration_seconds"+suffix, func(l map[string]string, v float64) {
			if l["priority_level"] != "exempt" {
				out["apf wait"+suffix] += v
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// apiOpKey is the waitSums key of one verb on a resource (and subresource).
func apiOpKey(verb, resource, sub string) string {
	if sub != "" {
		resource += "/" + sub
	}
	return "api " + verb + " " + resource
}

// busy is the CPU use of the machine and of each process over a window.
type busy struct {
	Window      time.Duration
	MachineBusy float64 // share of all CPUs not idle (0..1)
	Cores       int
	API, Etcd   time.Duration // CPU time of kube-apiserver, etcd
	Controllers time.Duration
	Bench       time.Duration
}

// busyMark is a point to measure busy from.
type busyMark struct {
	at                         time.Time
	idle, total                uint64 // /proc/stat jiffies, all CPUs
	api, etcd, controllers, me time.Duration
	cores                      int
}

func markBusy(b *bed) busyMark {
	m := busyMark{at: time.Now()}
	m.idle, m.total, m.cores = cpuJiffies()
	m.api = cpuOf(b.apiPids)
	m.etcd = cpuOf(b.etcdPids)
	if b.run != nil {
		m.controllers = cpuOf(b.run.pids())
	}
	m.me = cpuOf([]int{os.Getpid()})
	return m
}

func (m busyMark) since(b *bed) busy {
	n := markBusy(b)
	out := busy{Window: n.at.Sub(m.at), Cores: n.cores, API: n.api - m.api, Etcd: n.etcd - m.etcd,
		Controllers: n.controllers - m.controllers, Bench: n.me - m.me}
	if dt := n.total - m.total; dt > 0 {
		out.MachineBusy = 1 - float64(n.idle-m.idle)/float64(dt)
	}
	return out
}

func cpuOf(pids []int) time.Duration {
	st, err := readProcs(pids)
	if err != nil {
		return 0
	}
	return st.CPU
}

// cpuJiffies reads the aggregate cpu line of /proc/stat: idle (idle +
// iowait) and total jiffies, and the number of CPUs.
func cpuJiffies() (idle, total uint64, cores int) {
	f, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "cpu "):
			for i, field := range strings.Fields(line)[1:] {
				v, _ := strconv.ParseUint(field, 10, 64)
				total += v
				if i == 3 || i == 4 { // idle, iowait
					idle += v
				}
			}
		case strings.HasPrefix(line, "cpu"):
			cores++
		}
	}
	return idle, total, cores
}

// cores is a CPU time as a share of the window, in cores.
func (b busy) cores(d time.Duration) float64 {
	if b.Window <= 0 {
		return 0
	}
	return d.Seconds() / b.Window.Seconds()
}

func (b busy) String() string {
	return fmt.Sprintf("machine %.0f%% busy over %s (%d CPUs): kube-apiserver %.2f cores, etcd %.2f, controllers %.2f, benchmark %.2f",
		100*b.MachineBusy, b.Window.Round(10*time.Millisecond), b.Cores, b.cores(b.API), b.cores(b.Etcd), b.cores(b.Controllers), b.cores(b.Bench))
}
