package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

func (r *report) targetsSection(b *strings.Builder) {
	p := printTo(b)
	ours := r.scenario(sysOurs)
	tuned := r.scenario(sysCommunityTuned)
	def := r.scenario(sysCommunityDefault)
	var steadyOurs *steadyResult
	for _, s := range r.steady {
		if s.System.ID == sysOurs && s.Err == nil {
			steadyOurs = s
		}
	}
	p("## Targets")
	p("")
	p("| target | measured | |")
	p("|---|---|---|")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**MISSED**"
	}
	if ours == nil {
		p("| (snapkeeper's scenario did not run or failed) | | |")
	} else {
		n := ours.N
		ready, deleted := ours.Create.Duration, ours.Delete.Duration
		note := ""
		if n != 500 {
			note = fmt.Sprintf(" (measured at N=%d; the target is for 500)", n)
		}
		p("| all ready within 5 s, 500 snapshots | %s%s | %s |", secs(ready), note, verdict(ready <= 5*time.Second))
		p("| all deleted within 5 s | %s%s | %s |", secs(deleted), note, verdict(deleted <= 5*time.Second))
		w := ours.Create.Writes.Total(isNotEvent) / float64(n)
		p("| at most %d API writes per snapshot, the contract's cost model (create, binder + CSI side, without the user's create) | %.2f | %s |", contractWrites, w, verdict(w <= contractWrites+0.0001))
		ev := (eventsCreated(ours.Create) + eventsCreated(ours.Delete)) / float64(n)
		p("| at most 1 event per snapshot (create + delete) | %.2f | %s |", ev, verdict(ev <= 1.0001))
		if tuned != nil {
			t := extrapolated(tuned.Create.Duration, tuned.N, n)
			p("| all-ready in at most 1/10 of the tuned community pair's time | %s vs %s: 1/%.1f | %s |", secs(ready), secs(t), t.Seconds()/ready.Seconds(), verdict(ready*10 <= t))
		}
		if def != nil {
			t := extrapolated(def.Create.Duration, def.N, n)
			how := ""
			if def.N != n {
				how = fmt.Sprintf(" (community extrapolated from N=%d)", def.N)
			}
			p("| all-ready in at most 1/100 of the default community pair's time | %s vs %s%s: 1/%.0f | %s |", secs(ready), secs(t), how, t.Seconds()/ready.Seconds(), verdict(ready*100 <= t))
		}
	}
	for _, s := range append([]*steadyResult{steadyOurs}, r.oursCold()) {
		if s == nil {
			continue
		}
		what := "restart"
		if s.Direct {
			what = "cold start"
		}
		w := s.Start.Writes.Total(nil)
		p("| %s over %d ready snapshots: 0 API writes | %.0f | %s |", what, s.M, w, verdict(w == 0))
		c := snapshotCalls(s.Start.Calls)
		p("| %s over %d ready snapshots: 0 snapshot CSI calls | %d | %s |", what, s.M, c, verdict(c == 0))
	}
	if _, runs := r.waitingRuns(); len(runs[sysOurs]) > 0 {
		w := spreadOf(runs[sysOurs], waitWrites)
		p("| 0 API writes per snapshot during the wait for a slow driver (ready %s after the cut; most of %d runs) | %.2f | %s |", r.waitingRange(), len(runs[sysOurs]), w.max, verdict(w.max == 0))
	}
	if r.admission != nil && !r.admission.Missing && r.admission.Err == nil {
		for _, c := range []int{1, 16, 64} {
			worst, what := time.Duration(0), ""
			for _, row := range r.admission.Rows {
				if row.Path == "webhook (direct)" && row.Concurrency == c && row.P99 >= worst {
					worst, what = row.P99, row.Request
				}
			}
			if what != "" {
				p("| admission p99 under 5 ms, directly, concurrency %d | %s (%s) | %s |", c, ms(worst), what, verdict(worst < 5*time.Millisecond))
			}
		}
	}
	p("")
}

func (r *report) detailSections(b *strings.Builder) {
	p := printTo(b)
	ok := r.medianRuns()
	if len(ok) == 0 {
		return
	}
	header := func(first string) { tableHead(p, first, ok, func(s *scenarioResult) string { return s.System.Label }) }
	p("### Where the time goes: when snapshots reach each stage (median / last, from the first request)")
	p("")
	header("stage")
	for _, st := range append(append([]string{}, createStages...), deleteStages...) {
		create := slices.Contains(createStages, st)
		p("| %s | %s |", st, joinCols(ok, func(s *scenarioResult) string {
			ph := s.Delete
			if create {
				ph = s.Create
			}
			t, found := ph.Stages[st]
			if !found {
				return "-"
			}
			return fmt.Sprintf("%.2f / %.2f s", t.P50.Seconds(), t.Last.Seconds())
		}))
	}
	p("")
	r.waitsSection(b)
	for _, ph := range []struct {
		name string
		get  func(*scenarioResult) phase
	}{{"create", func(s *scenarioResult) phase { return s.Create }}, {"delete", func(s *scenarioResult) phase { return s.Delete }}} {
		p("### API writes per snapshot by verb and resource, %s phase", ph.name)
		p("")
		p("From the API server's `apiserver_request_total` (every result code), minus the benchmark's own requests;")
		p("the benchmark's own %s of the N VolumeSnapshots is not included.", map[string]string{"create": "creation", "delete": "deletion"}[ph.name])
		p("")
		header("write")
		keys := map[writeKey]bool{}
		for _, s := range ok {
			for _, k := range ph.get(s).Writes.Keys() {
				keys[k] = true
			}
		}
		for _, k := range sortedWriteKeys(keys) {
			p("| %s | %s |", k, joinCols(ok, func(s *scenarioResult) string { return per(ph.get(s).Writes.ByKey[k], s.N) }))
		}
		p("| **total without events** | %s |", joinCols(ok, func(s *scenarioResult) string { return "**" + per(ph.get(s).Writes.Total(isNotEvent), s.N) + "**" }))
		p("")
	}
	p("### Events by object kind and reason (per snapshot, both phases)")
	p("")
	header("event")
	bothPhasesPerSnapshot(p, ok, func(ph phase) map[string]int { return ph.Events })
	p("")
	p("### CSI calls per snapshot by method (both phases; failures as \"Method Code\")")
	p("")
	header("CSI call")
	bothPhasesPerSnapshot(p, ok, func(ph phase) map[string]int64 { return ph.Calls })
	p("")
	for _, s := range ok {
		if len(s.OurMetrics) == 0 {
			continue
		}
		p("### snapkeeper's own counters after the run (create + delete)")
		p("")
		p("| metric | value |")
		p("|---|---|")
		for _, k := range sortedKeys(s.OurMetrics) {
			if s.OurMetrics[k] != 0 {
				p("| `%s` | %.0f |", k, s.OurMetrics[k])
			}
		}
		p("")
	}
}

// bothPhasesPerSnapshot writes a table row per key that counts of any
// run's phase hold: the key's count over both phases, per snapshot.
func bothPhasesPerSnapshot[V int | int64](p printer, runs []*scenarioResult, counts func(phase) map[string]V) {
	keys := map[string]bool{}
	for _, s := range runs {
		for _, ph := range []phase{s.Create, s.Delete} {
			for k := range counts(ph) {
				keys[k] = true
			}
		}
	}
	for _, k := range sortedKeys(keys) {
		p("| %s | %s |", k, joinCols(runs, func(s *scenarioResult) string {
			return per(float64(counts(s.Create)[k]+counts(s.Delete)[k]), s.N)
		}))
	}
}

// oursCold is snapkeeper's successful cold start, if any.
func (r *report) oursCold() *steadyResult {
	for _, s := range r.cold {
		if s.System.ID == sysOurs && s.Err == nil {
			return s
		}
	}
	return nil
}

func sortedWriteKeys(m map[writeKey]bool) []writeKey {
	w := newWriteCounts()
	for k := range m {
		w.ByKey[k] = 1
	}
	return w.Keys()
}

func mib(kb int64) string { return fmt.Sprintf("%.0f MiB", float64(kb)/1024) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func (r *report) admissionSection(b *strings.Builder) {
	p := printTo(b)
	p("## Admission latency (snapkeeper-webhook)")
	p("")
	switch {
	case r.admission == nil:
		p("(not run)")
	case r.admission.Missing:
		p("**TODO**: `./cmd/webhook` does not exist yet; this section stays empty until it does.")
	case r.admission.Err != nil:
		p("FAILED: %s", oneLine(r.admission.Err.Error()))
	default:
		p("The webhook runs as `framework.StartWebhookIn` starts it (TLS, registered for the snapshot kinds and for")
		p("PVCs with a data source). \"webhook (direct)\" posts an AdmissionReview over kept-alive TLS connections;")
		p("\"API server + webhook\" is a dry-run create through the API server, which calls the webhook; \"API")
		p("server alone\" is the same dry-run after the webhook was unregistered, so the difference is what the")
		p("webhook adds. The restore is checked against a ready snapshot, its content and its size; the dynamic")
		p("snapshot against its PVC and the default class. Through the API server the requests are sent by ServiceAccounts")
		p("(`%s00`, ... in namespace %s, allowed to create claims and VolumeSnapshots there), request i as account", applierPrefix, benchNamespace)
		p("i mod their number: not system:masters, so API Priority and Fairness applies to them as to a user's tools (the")
		p("last column shows the priority level that dispatched them). The load generator shares the machine's cores with")
		p("the webhook and the API server, so at concurrency 16 and 64 the figures include CPU queueing of all three.")
		p("")
		p("| request | path | concurrency | requests | p50 | p99 | requests/s | sent as | 429s | APF priority level (requests) |")
		p("|---|---|---|---|---|---|---|---|---|---|")
		for _, row := range r.admission.Rows {
			id, rej, lv := "-", "-", "-"
			if row.Identity != "" {
				id, rej, lv = row.Identity, fmt.Sprintf("%.0f", row.Code429), row.Levels
			}
			p("| %s | %s | %d | %d | %s | %s | %.0f | %s | %s | %s |", row.Request, row.Path, row.Concurrency, row.N, ms(row.P50), ms(row.P99), row.PerSecond, id, rej, lv)
		}
	}
	p("")
}
