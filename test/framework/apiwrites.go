package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Writes are counted where they land: the API server's own
// apiserver_request_total, by verb, API group and resource (with
// subresource). No controller-manager or scheduler runs here, so the writes
// of a window are those of the components under test and of the test itself.

// WriteKey is one kind of API write.
type WriteKey struct {
	Verb     string // create, update, patch, delete, deletecollection, apply
	Group    string // "" for the core group
	Resource string // with its subresource: "volumesnapshots/status"
	Code     string // the HTTP code when it is not 2xx (a refused write), else ""
}

func (k WriteKey) String() string {
	if k.Code != "" {
		return k.Verb + " " + k.Resource + " (" + k.Code + ")"
	}
	return k.Verb + " " + k.Resource
}

// APIWrites counts API writes by kind.
type APIWrites map[WriteKey]float64

var writeVerbs = map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "APPLY": "apply",
	"DELETE": "delete", "DELETECOLLECTION": "deletecollection"}

// IsContractWrite: a write on the objects of the snapshot contract
// (snapshot.storage.k8s.io, groupsnapshot.storage.k8s.io and claims).
func IsContractWrite(k WriteKey) bool {
	return strings.HasSuffix(k.Group, "snapshot.storage.k8s.io") || strings.HasPrefix(k.Resource, "persistentvolumeclaims")
}

// IsEventWrite: an event (core or events.k8s.io).
func IsEventWrite(k WriteKey) bool { return strings.HasPrefix(k.Resource, "events") }

// IsOtherWrite: neither of the above, nor a Lease (the API server renews
// its own Leases all the time).
func IsOtherWrite(k WriteKey) bool {
	return !IsContractWrite(k) && !IsEventWrite(k) && !strings.HasPrefix(k.Resource, "leases")
}

// Sub returns w minus o, without the kinds that did not change.
func (w APIWrites) Sub(o APIWrites) APIWrites { return DiffCounts(w, o) }

// Total sums the kinds keep accepts (all with nil).
func (w APIWrites) Total(keep func(WriteKey) bool) float64 { return SumCounts(w, keep) }

// DiffCounts is a - b without the keys that did not change: what counters
// read at both ends of a window counted in it.
func DiffCounts[M ~map[K]V, K comparable, V int | int64 | float64](a, b M) M {
	out := M{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// SumCounts sums the counters whose keys keep accepts (all with nil).
func SumCounts[M ~map[K]float64, K comparable](m M, keep func(K) bool) float64 {
	var s float64
	for k, v := range m {
		if keep == nil || keep(k) {
			s += v
		}
	}
	return s
}

// String lists the kinds, e.g. "3 patch volumesnapshotcontents, 1 create events".
func (w APIWrites) String() string {
	keys := make([]WriteKey, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, strconv.FormatFloat(w[k], 'f', -1, 64)+" "+k.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// APIWrites reads the API server's write counters. It fails when the
// counter is missing, so a test that expects none cannot pass by accident.
func (e *Env) APIWrites(ctx context.Context) (APIWrites, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the local test API server's self-signed certificate
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	body, err := doScrape(client, req)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	out := APIWrites{}
	seen := false
	err = EachSample(bytes.NewReader(body), "apiserver_request_total", func(labels map[string]string, v float64) {
		seen = true
		verb, ok := writeVerbs[labels["verb"]]
		if !ok {
			return
		}
		res := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		k := WriteKey{Verb: verb, Group: labels["group"], Resource: res}
		if c := labels["code"]; !strings.HasPrefix(c, "2") {
			k.Code = c
		}
		out[k] += v
	})
	if err == nil && !seen {
		err = fmt.Errorf("the API server exposes no apiserver_request_total")
	}
	return out, err
}

// WaitQuietWrites returns the write counters once the writes the keep
// filter accepts (nil: all) stood still for quiet, or an error after timeout.
func (e *Env) WaitQuietWrites(ctx context.Context, keep func(WriteKey) bool, quiet, timeout time.Duration) (APIWrites, error) {
	return WaitStill(ctx, e.APIWrites, func(w APIWrites) float64 { return w.Total(keep) }, 250*time.Millisecond, quiet, timeout)
}

// WaitStill reads counters every poll until their total did not change
// for quiet and returns the last reading, or an error after timeout.
func WaitStill[C any](ctx context.Context, read func(context.Context) (C, error), total func(C) float64, poll, quiet, timeout time.Duration) (C, error) {
	deadline := time.Now().Add(timeout)
	last, err := read(ctx)
	if err != nil {
		return last, err
	}
	since := time.Now()
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(poll):
		}
		cur, err := read(ctx)
		if err != nil {
			return last, err
		}
		if total(cur) != total(last) {
			since = time.Now()
		}
		last = cur
		if time.Since(since) >= quiet {
			return last, nil
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("API writes still going on after %s", timeout)
		}
	}
}

// EachSample calls fn for every sample of metric name in a Prometheus text
// exposition. Label values here never hold escaped quotes.
func EachSample(r io.Reader, name string, fn func(labels map[string]string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := map[string]string{}
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			for _, kv := range splitLabels(rest[1:end]) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					labels[k] = strings.Trim(v, `"`)
				}
			}
			rest = rest[end+1:]
		case !strings.HasPrefix(rest, " "):
			continue // a longer metric name with the same prefix
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			fn(labels, v)
		}
	}
	return sc.Err()
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			if i == 0 || s[i-1] != '\\' {
				inQuote = !inQuote
			}
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
