package main

import (
	"fmt"
	"slices"
	"strings"
)

// scalePerOp says, per system, phase and N, what one write cost the API
// server: its and etcd's CPU per request, and the mean time it took to
// serve each kind of request that a snapshot's trip makes (from
// apiserver_request_duration_seconds and, below the API server,
// etcd_request_duration_seconds). A cost that holds across N is linear; one
// that grows is where the time per snapshot grows.
func (r *report) scalePerOp(b *strings.Builder) {
	p := printTo(b)
	if len(r.scale) == 0 {
		return
	}
	p("### Per operation at each N")
	p("")
	p("What one request cost at each N, over the whole phase (first request until writes stopped): the CPU of")
	p("kube-apiserver and etcd per API write (every client's, the benchmark's own included), our controllers' CPU per")
	p("snapshot, and the mean time the API server took to serve each kind of request a snapshot's trip makes")
	p("(`apiserver_request_duration_seconds`: from its handler to its answer, after API Priority and Fairness; on")
	p("2 cores it includes waiting for a CPU) and what its requests to etcd took (`etcd_request_duration_seconds`).")
	p("Requests are listed when they happened at least 0.5 times per snapshot in some run; below them, our")
	p("controllers' queue waits, sync times and round trips, and the API server's serving and APF waits (as in the")
	p("waits table above, but per occurrence). Each cell is the mean in ms, then how many per snapshot.")
	p("")
	for _, id := range scaleIDs(r.scale) {
		var rows []*scenarioResult
		for _, s := range r.scale {
			if s.System.ID == id && s.Err == nil {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		for _, phName := range []string{"create", "delete"} {
			ph := func(s *scenarioResult) phase {
				if phName == "create" {
					return s.Create
				}
				return s.Delete
			}
			var ns []string
			for _, s := range rows {
				if phName == "create" && s.Seeded {
					ns = append(ns, fmt.Sprintf("N=%d (seeded: no create)", s.N))
					continue
				}
				ns = append(ns, fmt.Sprintf("N=%d", s.N))
			}
			p("#### %s, %s phase", rows[0].System.Label, phName)
			p("")
			p("| | %s |", strings.Join(ns, " | "))
			p("|---|%s", strings.Repeat("---|", len(ns)))
			cells := func(f func(s *scenarioResult) string) string {
				var c []string
				for _, s := range rows {
					if phName == "create" && s.Seeded {
						c = append(c, "-")
						continue
					}
					c = append(c, f(s))
				}
				return strings.Join(c, " | ")
			}
			p("| kube-apiserver + etcd CPU per API write | %s |", cells(func(s *scenarioResult) string {
				all := ph(s).Codes.Total(func(writeKey) bool { return true })
				if all == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2f ms", 1000*ph(s).PlaneCPU.Seconds()/all)
			}))
			p("| our controllers' CPU per snapshot | %s |", cells(func(s *scenarioResult) string {
				return fmt.Sprintf("%.2f ms", 1000*ph(s).CPU.Seconds()/float64(s.N))
			}))
			p("| the benchmark's CPU per snapshot (its requests and its watch) | %s |", cells(func(s *scenarioResult) string {
				return fmt.Sprintf("%.2f ms", 1000*ph(s).BenchCPU.Seconds()/float64(s.N))
			}))
			for _, op := range perOpKeys(rows, phName) {
				p("| %s | %s |", op, cells(func(s *scenarioResult) string {
					w := ph(s).Waits
					c := w[op+"_count"]
					if c == 0 {
						return "-"
					}
					return fmt.Sprintf("%.1f ms · %.2f×", 1000*w[op+"_sum"]/c, c/float64(s.N))
				}))
			}
			// Our loops' queue waits and sync times, our round trips and
			// the API server's serving and APF waits, per occurrence.
			for _, wr := range waitRows(rows) {
				p("| %s | %s |", wr.label, cells(func(s *scenarioResult) string {
					total, count, ok := wr.get(s, ph(s))
					if !ok || count == 0 {
						return "-"
					}
					return fmt.Sprintf("%.1f ms · %.2f×", float64(total.Microseconds())/1000/count, count/float64(s.N))
				}))
			}
			p("")
		}
	}
	r.profilesSection(b)
}

// perOpKeys are the request kinds ("api VERB resource", "etcd op type")
// that happened at least 0.5 times per snapshot in some run of the phase.
func perOpKeys(rows []*scenarioResult, phase string) []string {
	seen := map[string]bool{}
	for _, s := range rows {
		w := s.Create.Waits
		if phase == "delete" {
			w = s.Delete.Waits
		}
		for k, v := range w {
			op, ok := strings.CutSuffix(k, "_count")
			if !ok || !(strings.HasPrefix(op, "api ") || strings.HasPrefix(op, "etcd ")) {
				continue
			}
			if v/float64(s.N) >= 0.5 {
				seen[op] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// profilesSection prints, with -profile, the top functions of each
// process's CPU profile per run and phase.
func (r *report) profilesSection(b *strings.Builder) {
	p := printTo(b)
	var runs []*scenarioResult
	for _, s := range r.scale {
		if len(s.Create.Profiles)+len(s.Delete.Profiles)+len(s.RestHeap) > 0 {
			runs = append(runs, s)
		}
	}
	if len(runs) == 0 {
		return
	}
	p("### CPU profiles (-profile %s)", profileDir)
	p("")
	p("Back-to-back %s CPU profiles of each process over each phase, merged; the %d functions with the most CPU", profileChunk, profileTop)
	p("of their own (flat) and, below, those with the most including their callees (cum). Reproduce with the same")
	p("command, then `go tool pprof -top <files>` (or `-http=:8080`) over one process's files of one phase.")
	p("")
	// printTop prints the top functions of files as a code block.
	printTop := func(files []string, cum bool, extra ...string) {
		top, err := pprofTop(files, profileTop, cum, extra...)
		if err != nil {
			top = err.Error()
		}
		p("```")
		p("%s", strings.TrimSpace(trimTopHeader(top)))
		p("```")
	}
	for _, s := range runs {
		for _, ph := range []struct {
			name string
			set  profileSet
		}{{"create", s.Create.Profiles}, {"delete", s.Delete.Profiles}} {
			for _, proc := range ph.set.processes() {
				files := ph.set[proc]
				p("#### %s, N=%d, %s phase: %s (%d profiles, `%s-%s-%s-*.pb.gz`)", s.System.Label, s.N, ph.name, proc, len(files), s.Tag, ph.name, proc)
				p("")
				printTop(files, false)
				printTop(files, true)
				p("")
			}
		}
		for _, proc := range s.RestHeap.processes() {
			p("#### %s, N=%d, at rest (every snapshot ready, writes stopped): %s heap in use (`%s-rest-%s.pb.gz`)", s.System.Label, s.N, proc, s.Tag, proc)
			p("")
			printTop(s.RestHeap[proc], false, "-sample_index=inuse_space")
			p("")
		}
	}
}

const profileTop = 15

// trimTopHeader drops the lines of `go tool pprof -top` before its
// summary ("Showing nodes ..."), which name the files and the build.
func trimTopHeader(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "Duration:") || strings.HasPrefix(strings.TrimSpace(l), "Showing nodes") {
			return strings.Join(lines[i:], "\n")
		}
	}
	return s
}
