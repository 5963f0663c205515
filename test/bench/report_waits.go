package main

import (
	"fmt"
	"strings"
	"time"
)

// The waits table: where an average snapshot's trip spent its time in each
// phase (waitsum.go says what is summed).

// waitRow is one line of the waits table: a per-snapshot figure of a run.
type waitRow struct {
	label string
	ours  bool // our controllers' own metric (the community pair does not export it)
	get   func(s *scenarioResult, ph phase) (total time.Duration, count float64, ok bool)
}

// ourProcesses are our two processes in the benchmark, as the waits keys
// name them.
var ourProcesses = []struct{ name, label string }{{"snapkeeper-binder", "binder"}, {"snapkeeper-csi-side", "CSI side"}}

// ourSum sums a metric's _sum and _count of one process over the label
// values keep accepts.
func ourSum(ph phase, proc, metric string, keep func(label string) bool) (time.Duration, float64, bool) {
	var sum, count float64
	found := false
	for k, v := range ph.Waits {
		rest, ok := strings.CutPrefix(k, proc+" "+metric)
		if !ok {
			continue
		}
		suffix, label, _ := strings.Cut(rest, " ")
		if keep != nil && !keep(label) {
			continue
		}
		switch suffix {
		case "_sum":
			sum += v
			found = true
		case "_count":
			count += v
		}
	}
	return time.Duration(sum * float64(time.Second)), count, found
}

func isWriteVerb(v string) bool { return writeVerbs[v] }

// waitRows lists the rows for the loops and calls present in the runs.
func waitRows(runs []*scenarioResult) []waitRow {
	var rows []waitRow
	for _, p := range ourProcesses {
		for _, loop := range loopsOf(runs, p.name) {
			rows = append(rows,
				waitRow{label: p.label + ": queued in `" + loop + "`", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
					return ourSum(ph, p.name, "workqueue_queue_duration_seconds", func(l string) bool { return l == loop })
				}},
				waitRow{label: p.label + ": syncing in `" + loop + "` (API and CSI calls included)", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
					return ourSum(ph, p.name, "workqueue_work_duration_seconds", func(l string) bool { return l == loop })
				}})
		}
		rows = append(rows,
			waitRow{label: p.label + ": API writes, round trip", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
				return ourSum(ph, p.name, "rest_client_request_duration_seconds", isWriteVerb)
			}},
			waitRow{label: p.label + ": API reads (GET), round trip", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
				return ourSum(ph, p.name, "rest_client_request_duration_seconds", func(l string) bool { return l == "GET" })
			}},
			waitRow{label: p.label + ": client-side rate limiter", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
				return ourSum(ph, p.name, "rest_client_rate_limiter_duration_seconds", nil)
			}},
			waitRow{label: p.label + ": watch, from a write's answer to its event", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
				return ourSum(ph, p.name, "snapkeeper_watch_delay_seconds", nil)
			}},
			waitRow{label: p.label + ": retry backoff after failed syncs", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
				return ourSum(ph, p.name, "snapkeeper_retry_backoff_seconds", nil)
			}})
	}
	rows = append(rows,
		waitRow{label: "CSI side: CSI calls (CreateSnapshot, DeleteSnapshot)", ours: true, get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
			return ourSum(ph, "snapkeeper-csi-side", "csi_sidecar_operations_seconds", func(l string) bool {
				return strings.HasSuffix(l, "/CreateSnapshot") || strings.HasSuffix(l, "/DeleteSnapshot")
			})
		}},
		waitRow{label: "kube-apiserver: serving writes (every client)", get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
			return apiServing(ph)
		}},
		waitRow{label: "kube-apiserver: queued by API Priority and Fairness (not exempt)", get: func(_ *scenarioResult, ph phase) (time.Duration, float64, bool) {
			v, ok := ph.Waits["apf wait_sum"]
			return time.Duration(v * float64(time.Second)), ph.Waits["apf wait_count"], ok
		}})
	return rows
}

// apiServing is the time the API server spent serving the phase's writes
// (every client) and their count.
func apiServing(ph phase) (time.Duration, float64, bool) {
	v, ok := ph.Waits["apiserver write_sum"]
	return time.Duration(v * float64(time.Second)), ph.Waits["apiserver write_count"], ok
}

// loopsOf are the work loops of one process seen in any run, sorted.
func loopsOf(runs []*scenarioResult, proc string) []string {
	seen := map[string]bool{}
	for _, s := range runs {
		for _, ph := range []phase{s.Create, s.Delete} {
			for k := range ph.Waits {
				if rest, ok := strings.CutPrefix(k, proc+" workqueue_queue_duration_seconds_sum "); ok {
					seen[rest] = true
				}
			}
		}
	}
	return sortedKeys(seen)
}

func (r *report) waitsSection(b *strings.Builder) {
	p := printTo(b)
	ok := r.medianRuns()
	if len(ok) == 0 {
		return
	}
	rows := waitRows(ok)
	p("### Where the time goes: waits per snapshot (median run)")
	p("")
	p("Each row is a histogram our controllers (or the API server) export, summed over the phase and divided by")
	p("the N snapshots: milliseconds per snapshot, then how many times per snapshot it happened. Waits of")
	p("concurrent keys add up, so a row is a share of the work, not a slice of the wall time; \"syncing\" contains")
	p("the API and CSI round trips made from the sync. The community pair does not export these histograms (\"-\").")
	p("The last rows are the CPU each process used from the first request until all-ready (all-gone), in cores,")
	p("and how busy the whole machine was.")
	p("")
	for _, phn := range []string{"create", "delete"} {
		get := func(s *scenarioResult) phase { return s.Create }
		if phn == "delete" {
			get = func(s *scenarioResult) phase { return s.Delete }
		}
		tableHead(p, phn+" phase", ok, func(s *scenarioResult) string { return s.System.Label })
		for _, row := range rows {
			cells := joinCols(ok, func(s *scenarioResult) string {
				d, n, found := row.get(s, get(s))
				if !found || s.N == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f ms · %.2f×", float64(d.Microseconds())/1000/float64(s.N), n/float64(s.N))
			})
			if strings.Trim(strings.ReplaceAll(cells, "|", ""), " -") == "" {
				continue // nothing measured in any column
			}
			p("| %s | %s |", row.label, cells)
		}
		p("| mean writes in flight at the API server (serving time ÷ time to all-%s) | %s |", map[string]string{"create": "ready", "delete": "gone"}[phn],
			joinCols(ok, func(s *scenarioResult) string {
				ph := get(s)
				if ph.Duration <= 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f", ph.Waits["apiserver write_sum"]/ph.Duration.Seconds())
			}))
		p("| CPU in cores: kube-apiserver · etcd · controllers · benchmark | %s |", joinCols(ok, func(s *scenarioResult) string {
			bz := get(s).Busy
			return fmt.Sprintf("%.2f · %.2f · %.2f · %.2f", bz.cores(bz.API), bz.cores(bz.Etcd), bz.cores(bz.Controllers), bz.cores(bz.Bench))
		}))
		p("| **machine busy** (share of %d CPUs not idle) | %s |", ok[0].Create.Busy.Cores, joinCols(ok, func(s *scenarioResult) string {
			return fmt.Sprintf("**%.0f %%**", 100*get(s).Busy.MachineBusy)
		}))
		p("")
	}
	if line := r.dominantWait(); line != "" {
		p("%s", line)
		p("")
	}
}

// dominantWait names, for our median run's create phase, the largest of
// our own waits and whether the machine had CPU to spare.
func (r *report) dominantWait() string {
	var ours *scenarioResult
	for _, s := range r.medianRuns() {
		if s.System.ID == sysOurs {
			ours = s
		}
	}
	if ours == nil || ours.N == 0 || len(ours.Create.Waits) == 0 {
		return ""
	}
	var best waitRow
	var bestD time.Duration
	for _, row := range waitRows([]*scenarioResult{ours}) {
		if !row.ours || strings.Contains(row.label, "syncing") {
			continue // a sync contains its calls: name what it waits on
		}
		if d, _, ok := row.get(ours, ours.Create); ok && d > bestD {
			best, bestD = row, d
		}
	}
	bz := ours.Create.Busy
	api, _, _ := apiServing(ours.Create)
	return fmt.Sprintf("**What dominates (%s, create phase):** %s, %.1f ms per snapshot; the API server spent %.1f ms per snapshot serving writes, "+
		"and the machine was %.0f %% busy until all-ready (kube-apiserver %.2f cores, etcd %.2f, our controllers %.2f, the benchmark %.2f of %d).",
		ours.System.Label, best.label, float64(bestD.Microseconds())/1000/float64(ours.N), float64(api.Microseconds())/1000/float64(ours.N),
		100*bz.MachineBusy, bz.cores(bz.API), bz.cores(bz.Etcd), bz.cores(bz.Controllers), bz.cores(bz.Bench), bz.Cores)
}
