package scheduleview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// timeLayout shows a time to the minute, cron's resolution, with its zone
// abbreviation so a daylight-saving change reads as one.
const timeLayout = "2006-01-02 15:04 MST"

// Totals are what Write's summary line counts.
type Totals struct {
	Schedules, Invalid, Kept, Delete int
}

// Count sums views.
func Count(views []View) Totals {
	t := Totals{Schedules: len(views)}
	for _, v := range views {
		if v.Error != "" {
			t.Invalid++
		}
		for _, se := range v.Series {
			t.Kept += len(se.Keep)
			t.Delete += len(se.Delete)
		}
	}
	return t
}

// Write prints views as text: per schedule its line, its next runs, and
// per series the snapshots kept and those retention would delete now; then
// a summary line.
func Write(w io.Writer, views []View) error {
	var b strings.Builder
	for _, v := range views {
		writeView(&b, v)
	}
	t := Count(views)
	fmt.Fprintf(&b, "%d schedules (%d invalid), %d snapshots kept, %d would be deleted now (dry run: nothing was deleted)\n",
		t.Schedules, t.Invalid, t.Kept, t.Delete)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeView(b *strings.Builder, v View) {
	mode := ""
	if v.Group {
		mode = ", group snapshots"
	}
	fmt.Fprintf(b, "SnapshotSchedule %s/%s: %q in %s%s, retention %s\n", v.Namespace, v.Name, v.Schedule, v.TimeZone, mode, v.Retention)
	switch {
	case v.Error != "":
		fmt.Fprintf(b, "  invalid spec: %s\n  nothing is cut or deleted until the spec is fixed\n", v.Error)
		return
	case v.Note != "":
		fmt.Fprintf(b, "  %s\n", v.Note)
		return
	case v.Suspended:
		b.WriteString("  next: none, suspended (spec.suspend); retention still applies\n")
	}
	for _, r := range v.Next {
		fmt.Fprintf(b, "  next: %s (%s)\n", r.Local.Format(timeLayout), r.UTC.Format(timeLayout))
	}
	if len(v.Series) == 0 {
		b.WriteString("  no snapshots of this schedule yet\n")
		return
	}
	for _, se := range v.Series {
		what := "claim " + se.Name
		if v.Group {
			what = "group series"
		}
		deleting := ""
		if se.Deleting > 0 {
			deleting = fmt.Sprintf(", %d being deleted already", se.Deleting)
		}
		fmt.Fprintf(b, "  %s: keeps %d, would delete %d%s\n", what, len(se.Keep), len(se.Delete), deleting)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		for _, s := range se.Keep {
			fmt.Fprintf(tw, "    keep\t%s\t%s\t%s\t%s\n", s.Name, s.Time.Format(timeLayout), s.State, strings.Join(s.Reasons, ", "))
		}
		for _, s := range se.Delete {
			fmt.Fprintf(tw, "    delete\t%s\t%s\t%s\t%s\n", s.Name, s.Time.Format(timeLayout), s.State, strings.Join(s.Reasons, ", "))
		}
		_ = tw.Flush() // into a strings.Builder: cannot fail
	}
}
