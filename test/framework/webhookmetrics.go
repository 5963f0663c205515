package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Samples is one scrape of a Prometheus text endpoint: every sample's
// value by its series exactly as exposed, name{labels}.
type Samples map[string]float64

// ScrapeBody GETs url (a /metrics endpoint) with client and returns the
// body of a 200 answer.
func ScrapeBody(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return doScrape(client, req)
}

// doScrape is ScrapeBody for a request the caller built (with a bearer
// token, say).
func doScrape(client *http.Client, req *http.Request) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %s", req.URL, resp.Status)
	}
	return b, nil
}

// Scrape reads the webhook's /metrics.
func (w *Webhook) Scrape(ctx context.Context) (Samples, error) {
	body, err := ScrapeBody(ctx, w.Client(), "https://"+w.Addr+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape webhook metrics: %w", err)
	}
	out := Samples{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("scrape webhook metrics: sample %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape webhook metrics: %w", err)
	}
	return out, nil
}

// Sum adds the samples of metric name whose labels include every one of
// labels, each written as in the exposition: `verdict="denied"`.
func (s Samples) Sum(name string, labels ...string) float64 {
	total := 0.0
	for series, v := range s {
		n, l, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, want := range labels {
			if !strings.Contains(l, want) {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// WebhookLatency is what the webhook's own histogram
// (snapkeeper_webhook_request_duration_seconds, every resource) says about
// the requests answered between two scrapes.
type WebhookLatency struct {
	Count    int
	P50, P99 time.Duration
}

func (l WebhookLatency) String() string {
	return fmt.Sprintf("%d requests, p50 %v, p99 %v (webhook histogram)", l.Count, l.P50, l.P99)
}

// LatencyBetween computes WebhookLatency from two scrapes, interpolating
// inside a bucket as Prometheus' histogram_quantile does; with resources,
// only over the requests for those (e.g. "volumesnapshots").
func LatencyBetween(before, after Samples, resources ...string) WebhookLatency {
	const bucket = "snapkeeper_webhook_request_duration_seconds_bucket"
	cum := map[float64]float64{}
	for series, v := range after {
		n, l, _ := strings.Cut(series, "{")
		if n != bucket {
			continue
		}
		if len(resources) > 0 && !slices.ContainsFunc(resources, func(r string) bool { return strings.Contains(l, `resource="`+r+`"`) }) {
			continue
		}
		_, le, ok := strings.Cut(l, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses to +Inf
		if err != nil {
			continue
		}
		cum[bound] += v - before[series]
	}
	bounds := make([]float64, 0, len(cum))
	for b := range cum {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return WebhookLatency{}
	}
	total := cum[bounds[len(bounds)-1]]
	quantile := func(q float64) time.Duration {
		if total == 0 {
			return 0
		}
		rank := q * total
		lower, below := 0.0, 0.0
		for _, b := range bounds {
			if cum[b] >= rank {
				if math.IsInf(b, 1) {
					return seconds(lower) // above the last finite bucket
				}
				frac := 0.0
				if n := cum[b] - below; n > 0 {
					frac = (rank - below) / n
				}
				return seconds(lower + (b-lower)*frac)
			}
			lower, below = b, cum[b]
		}
		return seconds(lower)
	}
	return WebhookLatency{Count: int(total), P50: quantile(0.50), P99: quantile(0.99)}
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond)
}
