package main

import (
	"fmt"
	"sort"
	"strings"
)

// groupSection is the report's group-snapshot table.
func (r *report) groupSection(b *strings.Builder) {
	if len(r.groups) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	g0 := r.groups[0]
	p("## Volume group snapshots: %d groups of %d claims, created at once, then deleted", g0.Groups, g0.Size)
	p("")
	p("Each system on its own fresh control plane with the mock CSI driver, `%s` on every binder and CSI side;", groupGate)
	p("the driver's default VolumeGroupSnapshotClass (Delete). The clock runs until every group and its %d members are", g0.Size)
	p("ready, then until every group, group content, member and backend snapshot is gone. Writes are the API server's")
	p("count (the benchmark's own removed).")
	p("")
	p("| | %s |", joinGroupCols(r.groups, func(g *groupResult) string { return g.System.Label }))
	p("|---|%s", strings.Repeat("---|", len(r.groups)))
	row := func(name string, f func(g *groupResult) string) {
		p("| %s | %s |", name, joinGroupCols(r.groups, func(g *groupResult) string {
			if g.Err != nil {
				return "FAILED"
			}
			return f(g)
		}))
	}
	row("time to all-ready / all-deleted", func(g *groupResult) string { return secs(g.Create.Duration) + " / " + secs(g.Delete.Duration) })
	row("**API writes per group, create** (no events)", func(g *groupResult) string {
		return "**" + per(g.Create.Writes.Total(isNotEvent), g.Groups) + "**"
	})
	row("API writes per group, delete (no events)", func(g *groupResult) string { return per(g.Delete.Writes.Total(isNotEvent), g.Groups) })
	row("API writes per member, create + delete (no events)", func(g *groupResult) string {
		return per(g.Create.Writes.Total(isNotEvent)+g.Delete.Writes.Total(isNotEvent), g.members())
	})
	for _, res := range groupWriteResources(r.groups) {
		row("writes per group on "+res+", create / delete", func(g *groupResult) string {
			on := func(k writeKey) bool { return k.Resource == res }
			return per(g.Create.Writes.Total(on), g.Groups) + " / " + per(g.Delete.Writes.Total(on), g.Groups)
		})
	}
	row("**events per group** (create + delete)", func(g *groupResult) string {
		return fmt.Sprintf("**%s** (%s + %s)", per(eventsCreated(g.Create)+eventsCreated(g.Delete), g.Groups),
			per(eventsCreated(g.Create), g.Groups), per(eventsCreated(g.Delete), g.Groups))
	})
	row("event reasons", func(g *groupResult) string { return reasons(g.Create.Events, g.Delete.Events) })
	row("CSI calls per group, create / delete", func(g *groupResult) string {
		return callList(g.Create.Calls, g.Groups) + " / " + callList(g.Delete.Calls, g.Groups)
	})
	row("controller CPU, create + delete", func(g *groupResult) string {
		return fmt.Sprintf("%.2f s + %.2f s", g.Create.CPU.Seconds(), g.Delete.CPU.Seconds())
	})
	p("")
	for _, g := range r.groups {
		if g.Err != nil {
			p("- %s FAILED: %s", g.System.Label, oneLine(g.Err.Error()))
		}
	}
	p("")
}

// groupWriteResources are the resources (and subresources) any system
// wrote in the group scenario, sorted.
func groupWriteResources(gs []*groupResult) []string {
	seen := map[string]bool{}
	for _, g := range gs {
		for _, ph := range []phase{g.Create, g.Delete} {
			for k, v := range ph.Writes.ByKey {
				if v > 0 {
					seen[k.Resource] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for res := range seen {
		out = append(out, res)
	}
	sort.Strings(out)
	return out
}

func joinGroupCols(gs []*groupResult, f func(*groupResult) string) string {
	cols := make([]string, len(gs))
	for i, g := range gs {
		cols[i] = f(g)
	}
	return strings.Join(cols, " | ")
}

// reasons lists the event reasons of both phases with their counts.
func reasons(a, b map[string]int) string {
	all := map[string]int{}
	for _, m := range []map[string]int{a, b} {
		for k, v := range m {
			all[k] += v
		}
	}
	keys := make([]string, 0, len(all))
	for k, v := range all {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s: %d", k, all[k])
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// callList is the CSI calls by method, per group.
func callList(calls map[string]int64, n int) string {
	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if calls[k] > 0 && strings.Contains(k, "Snapshot") {
			out = append(out, k+" "+per(float64(calls[k]), n))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
