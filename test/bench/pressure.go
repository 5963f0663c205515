package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// pressure is what pushed back on the controllers in a window: the API
// server's rejections (API Priority and Fairness answers 429) and the
// controllers' own client-side rate limiters.
type pressure struct {
	Code429     float64            // apiserver_request_total{code="429"}, every verb
	APFRejected map[string]float64 // apiserver_flowcontrol_rejected_requests_total by priority_level/reason
	// ThrottleSeconds and ThrottleWaits: rest_client_rate_limiter_duration_seconds
	// (_sum and _count) summed over the controller processes that expose it.
	ThrottleSeconds float64
	ThrottleWaits   float64
	Exposing        int // processes that expose the rate-limiter metric
	Processes       int
}

// apiPressure scrapes the API server's rejection counters.
func (a *apiServer) apiPressure(ctx context.Context) (pressure, error) {
	p := pressure{APFRejected: map[string]float64{}}
	body, err := a.scrape(ctx)
	if err != nil {
		return p, err
	}
	err = framework.EachSample(bytes.NewReader(body), "apiserver_request_total", func(l map[string]string, v float64) {
		if l["code"] == "429" {
			p.Code429 += v
		}
	})
	if err != nil {
		return p, err
	}
	err = framework.EachSample(bytes.NewReader(body), "apiserver_flowcontrol_rejected_requests_total", func(l map[string]string, v float64) {
		p.APFRejected[l["priority_level"]+"/"+l["reason"]] += v
	})
	return p, err
}

// throttling adds the controllers' client-side rate-limiter waits to p.
func throttling(ctx context.Context, r *running, p *pressure) {
	p.Processes = len(r.addrs)
	for _, addr := range r.addrs {
		found := false
		for _, suffix := range []string{"_sum", "_count"} {
			samples, err := scrape(ctx, addr, "rest_client_rate_limiter_duration_seconds"+suffix)
			if err != nil {
				continue
			}
			for _, s := range samples {
				found = true
				if suffix == "_sum" {
					p.ThrottleSeconds += s.Value
				} else {
					p.ThrottleWaits += s.Value
				}
			}
		}
		if found {
			p.Exposing++
		}
	}
}

func (p pressure) sub(o pressure) pressure {
	return pressure{Code429: p.Code429 - o.Code429, APFRejected: framework.DiffCounts(p.APFRejected, o.APFRejected),
		ThrottleSeconds: p.ThrottleSeconds - o.ThrottleSeconds, ThrottleWaits: p.ThrottleWaits - o.ThrottleWaits,
		Exposing: p.Exposing, Processes: p.Processes}
}

func (p pressure) add(o pressure) pressure {
	out := p.sub(pressure{})
	out.Code429 += o.Code429
	out.ThrottleSeconds += o.ThrottleSeconds
	out.ThrottleWaits += o.ThrottleWaits
	for k, v := range o.APFRejected {
		out.APFRejected[k] += v
	}
	return out
}

func (p pressure) apfTotal() float64 {
	var s float64
	for _, v := range p.APFRejected {
		s += v
	}
	return s
}

// rejections is "429s: n (APF: level/reason n, ...)".
func (p pressure) rejections() string {
	s := fmt.Sprintf("%.0f", p.Code429)
	if len(p.APFRejected) == 0 {
		return s + " (APF rejected none)"
	}
	return s + " (APF: " + listing(p.APFRejected, ", ", func(k string, v float64) string { return fmt.Sprintf("%s %.0f", k, v) }) + ")"
}

// throttle is the client-side waiting, or why it is unknown.
func (p pressure) throttle() string {
	if p.Exposing == 0 {
		return "not exposed"
	}
	s := fmt.Sprintf("%.2f s over %.0f requests", p.ThrottleSeconds, p.ThrottleWaits)
	if p.Exposing < p.Processes {
		s += fmt.Sprintf(" (%d of %d processes expose it)", p.Exposing, p.Processes)
	}
	return s
}
