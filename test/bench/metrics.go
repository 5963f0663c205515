package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// writeKey names one kind of API write as the API server counts it:
// verb is apiserver_request_total's verb label (POST, PUT, PATCH, DELETE,
// APPLY, DELETECOLLECTION), resource includes the subresource
// ("volumesnapshots/status").
type writeKey struct {
	Verb     string
	Resource string
}

func (k writeKey) String() string { return verbName(k.Verb) + " " + k.Resource }

// verbName is the client-go style name of an API server verb label.
func verbName(v string) string {
	switch v {
	case "POST":
		return "create"
	case "PUT":
		return "update"
	case "PATCH":
		return "patch"
	case "APPLY":
		return "apply"
	case "DELETE":
		return "delete"
	case "DELETECOLLECTION":
		return "deletecollection"
	}
	return strings.ToLower(v)
}

// writeVerbs are the verbs that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// ignoredResources are written by the API server itself on a timer (its
// identity Lease) and by nobody under test: no system runs leader election.
// Reviews (a controller asking the API server what its own RBAC allows,
// token and access reviews) are POSTs that store nothing: not writes.
var ignoredResources = map[string]bool{"leases": true,
	"selfsubjectaccessreviews": true, "selfsubjectrulesreviews": true, "subjectaccessreviews": true,
	"localsubjectaccessreviews": true, "tokenreviews": true}

// writeCounts are API writes by kind; codes counts them by HTTP code.
type writeCounts struct {
	ByKey  map[writeKey]float64
	ByCode map[string]float64 // "409" etc., over all keys
}

func newWriteCounts() writeCounts {
	return writeCounts{ByKey: map[writeKey]float64{}, ByCode: map[string]float64{}}
}

// Sub returns w - o.
func (w writeCounts) Sub(o writeCounts) writeCounts {
	return writeCounts{ByKey: framework.DiffCounts(w.ByKey, o.ByKey), ByCode: framework.DiffCounts(w.ByCode, o.ByCode)}
}

// Total is the number of writes, optionally only those for which keep is true.
func (w writeCounts) Total(keep func(writeKey) bool) float64 {
	return framework.SumCounts(w.ByKey, keep)
}

// Keys returns the keys sorted by resource, then verb.
func (w writeCounts) Keys() []writeKey {
	keys := make([]writeKey, 0, len(w.ByKey))
	for k := range w.ByKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Resource != keys[j].Resource {
			return keys[i].Resource < keys[j].Resource
		}
		return verbName(keys[i].Verb) < verbName(keys[j].Verb)
	})
	return keys
}

func isEvent(k writeKey) bool    { return k.Resource == "events" }
func isNotEvent(k writeKey) bool { return !isEvent(k) }

// apiServer scrapes the API server's own request counters.
type apiServer struct {
	url    string
	client *http.Client
}

func newAPIServer(env *framework.Env) *apiServer {
	return &apiServer{url: env.URL, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // local test API server with a self-signed cert
	}}}
}

// scrape reads the API server's /metrics as the admin.
func (a *apiServer) scrape(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+framework.AdminToken)
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape API server metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape API server metrics: %s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// Writes returns apiserver_request_total summed per write verb and resource
// (all codes), without the ignored resources.
func (a *apiServer) Writes(ctx context.Context) (writeCounts, error) {
	out := newWriteCounts()
	body, err := a.scrape(ctx)
	if err != nil {
		return out, err
	}
	err = framework.EachSample(bytes.NewReader(body), "apiserver_request_total", func(labels map[string]string, v float64) {
		if !writeVerbs[labels["verb"]] || ignoredResources[labels["resource"]] {
			return
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out.ByKey[writeKey{Verb: labels["verb"], Resource: res}] += v
		out.ByCode[labels["code"]] += v
	})
	return out, err
}

// WaitQuiet scrapes the write counters every quiet/4 until they did not
// change for quiet, or timeout passes; it returns the last counters.
func (a *apiServer) WaitQuiet(ctx context.Context, quiet, timeout time.Duration) (writeCounts, error) {
	return framework.WaitStill(ctx, a.Writes, func(w writeCounts) float64 { return w.Total(nil) }, quiet/4, quiet, timeout)
}

// scrape returns the samples of metric name from a component's /metrics.
func scrape(ctx context.Context, addr, name string) ([]sample, error) {
	body, err := fetchMetrics(ctx, addr)
	if err != nil {
		return nil, err
	}
	var out []sample
	err = framework.EachSample(bytes.NewReader(body), name, func(l map[string]string, v float64) { out = append(out, sample{l, v}) })
	return out, err
}

type sample struct {
	Labels map[string]string
	Value  float64
}

// procStat is the CPU time and memory of one process.
type procStat struct {
	CPU   time.Duration // user + system
	HWMkB int64         // peak resident set (VmHWM)
	RSSkB int64         // resident set now (VmRSS)
}

// clockTick is USER_HZ, 100 on every Linux architecture Go supports.
const clockTick = 100

// readProc reads /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procStat, error) {
	var st procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return st, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	st.CPU = time.Duration(ut+stt) * time.Second / clockTick
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			st.HWMkB = n
		case "VmRSS":
			st.RSSkB = n
		}
	}
	return st, nil
}

// readProcs sums CPU and memory over pids (peak RSS is the sum of the peaks).
func readProcs(pids []int) (procStat, error) {
	var sum procStat
	for _, pid := range pids {
		st, err := readProc(pid)
		if err != nil {
			return sum, err
		}
		sum.CPU += st.CPU
		sum.HWMkB += st.HWMkB
		sum.RSSkB += st.RSSkB
	}
	return sum, nil
}

// findPids returns the processes whose command line holds every fragment
// (used to find the control plane's kube-apiserver and etcd, which the
// framework does not expose).
func findPids(fragments ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if framework.ContainsAll(string(b), fragments) {
			out = append(out, pid)
		}
	}
	return out
}
