package main

import (
	"fmt"
	"strings"
)

// groupSection is the report's group-snapshot table.
func (r *report) groupSection(b *strings.Builder) {
	if len(r.groups) == 0 {
		return
	}
	p := printTo(b)
	g0 := r.groups[0]
	p("## Volume group snapshots: %d groups of %d claims, created at once, then deleted", g0.Groups, g0.Size)
	p("")
	p("Each system on its own fresh control plane with the mock CSI driver, `%s` on every binder and CSI side;", groupGate)
	p("the driver's default VolumeGroupSnapshotClass (Delete). The write ceilings are measured first, as in the scenario,")
	p("then the claims are bound. The clock runs until every group and its %d members are ready, then until every group,", g0.Size)
	p("group content, member and backend snapshot is gone. Writes are the API server's count (the benchmark's own removed).")
	p("")
	row := resultTable(p, r.groups, func(g *groupResult) string { return g.System.Label }, func(g *groupResult) bool { return g.Err != nil })
	row("raw write ceiling of this control plane: ConfigMaps / VolumeSnapshots (CRD)", func(g *groupResult) string {
		if !g.measured() {
			return "not measured"
		}
		return fmt.Sprintf("%.0f / %.0f writes/s", g.Ceiling.ConfigMaps, g.Ceiling.Snapshots)
	})
	row("time to all-ready / all-deleted", func(g *groupResult) string { return secs(g.Create.Duration) + " / " + secs(g.Delete.Duration) })
	row("floor, create / delete: raw (ConfigMap ceiling) · CRD-priced", groupFloor)
	row("**time to all-ready ÷ floor** (raw · CRD-priced)", func(g *groupResult) string { return "**" + groupRatio(g, g.Create) + "**" })
	row("time to all-deleted ÷ floor (raw · CRD-priced)", func(g *groupResult) string { return groupRatio(g, g.Delete) })
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
	p("\"Floor\" as in the scenario: every write of the phase (the controllers', the events and the benchmark's %d", g0.Groups)
	p("creates or deletes) at this control plane's ceiling; the CRD-priced floor charges the writes to the snapshot and")
	p("group snapshot CRDs (VolumeSnapshots, VolumeGroupSnapshots, their contents and status) at the VolumeSnapshot ceiling.")
	p("")
	for _, g := range r.groups {
		if g.Err != nil {
			p("- %s FAILED: %s", g.System.Label, oneLine(g.Err.Error()))
		}
	}
	p("")
}

// measured reports whether both write ceilings of the run were measured.
func (g *groupResult) measured() bool { return g.Ceiling.ConfigMaps > 0 && g.Ceiling.Snapshots > 0 }

// groupFloor is the floor of both phases: raw, then CRD-priced.
func groupFloor(g *groupResult) string {
	if !g.measured() {
		return "not measured"
	}
	return floors(g.Create, g.Delete, g.Ceiling)
}

// groupRatio is the time of phase ph over its raw and CRD-priced floors.
func groupRatio(g *groupResult, ph phase) string {
	if !g.measured() {
		return "not measured"
	}
	return floorRatios(ph, g.Ceiling)
}

// groupAnalysis gives, per system of the group stage, the times to
// all-ready and all-deleted over their CRD-priced write floors.
func (r *report) groupAnalysis(p printer) {
	for _, g := range r.groups {
		head := fmt.Sprintf("- Groups, %d of %d claims, %s:", g.Groups, g.Size, g.System.Label)
		switch {
		case g.Err != nil:
			p("%s FAILED (%s).", head, oneLine(g.Err.Error()))
		case !g.measured():
			p("%s all-ready in %s; all-deleted in %s (no write ceiling measured).", head, secs(g.Create.Duration), secs(g.Delete.Duration))
		default:
			p("%s all-ready in %s, %.1f× its CRD-priced write floor; all-deleted in %s, %.1f×.", head,
				secs(g.Create.Duration), ratio(g.Create.Duration, floor(g.Create, g.Ceiling, true)),
				secs(g.Delete.Duration), ratio(g.Delete.Duration, floor(g.Delete, g.Ceiling, true)))
		}
	}
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
	return sortedKeys(seen)
}

// reasons lists the event reasons of both phases with their counts.
func reasons(a, b map[string]int) string {
	all := map[string]int{}
	for _, m := range []map[string]int{a, b} {
		for k, v := range m {
			all[k] += v
		}
	}
	return listing(all, ", ", func(k string, v int) string {
		if v <= 0 {
			return ""
		}
		return fmt.Sprintf("%s: %d", k, v)
	})
}

// callList is the CSI calls by method, per group.
func callList(calls map[string]int64, n int) string {
	return listing(calls, ", ", func(k string, v int64) string {
		if v <= 0 || !strings.Contains(k, "Snapshot") {
			return ""
		}
		return k + " " + per(float64(v), n)
	})
}
