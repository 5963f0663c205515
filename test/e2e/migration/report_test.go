package migration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// figures are what one run measured; log prints them, and appends a
// Markdown row to $SNAPKEEPER_MIGRATION_REPORT when set.
type figures struct {
	Test     string
	From, To impl
	N        int
	Cutting  int // in flight mid-CreateSnapshot at the switch
	Polling  int // in flight cut but not ready at the switch
	Naming   string
	Hang     time.Duration
	Window   time.Duration
	Wall     time.Duration

	MakeN      time.Duration // old pair: N created -> N ready
	MakeWrites writes
	MakeEvents string // the namespace's Events after the N were made, by reason

	Stop   time.Duration // SIGTERM -> both old processes gone
	Killed []string      // old processes that needed SIGKILL
	Start  time.Duration // new pair started -> ready
	Switch time.Duration // SIGTERM of the old pair -> every in-flight snapshot ready

	WindowWrites          writes
	WindowInflightChanges int     // changes (watch events) of in-flight objects in the window
	WindowReadyChanges    int     // changes of ready objects in the window
	WindowForNothing      float64 // window writes that changed nothing
	ReadyChangedWindow    []string
	FinishM               time.Duration // new pair start -> in-flight ready (includes the driver's hold)
	SwitchWrites          writes        // new pair start -> quiet after the in-flight ones finished
	SwitchChanges         int           // object changes among them
	SwitchForNothing      float64       // writes among them that changed nothing
	ReadyChanged          []string

	Calls           string // CSI calls since the switch, by method and code
	CreatesReady    int    // CSI calls about ready snapshots since the switch
	CreatesInflight int
	MaxCreates      int
	BackendAfter    int

	Deleted      int
	DeleteTime   time.Duration
	DeleteWrites writes // controllers only
	DeleteCalls  string
	Leak         bool // true: backend == contents after the deletions

	Failures []string
}

func (f *figures) inflight() int { return f.Cutting + f.Polling }

func perSnapshot(total float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", total/float64(n))
}

func (f *figures) log(t *testing.T) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "migration %s -> %s: N=%d ready, M=%d in flight (%d mid-CreateSnapshot, %d cut not ready), CSI names %s\n",
		f.From, f.To, f.N, f.inflight(), f.Cutting, f.Polling, f.Naming)
	fmt.Fprintf(&b, "  %s pair made the N ready in %s: %g contract writes (%s/snapshot), %g events [%s]\n",
		f.From, f.MakeN.Round(time.Millisecond), f.MakeWrites.Total(isContract), perSnapshot(f.MakeWrites.Total(isContract), f.N),
		f.MakeWrites.Total(isEvent), f.MakeWrites)
	fmt.Fprintf(&b, "    events by reason: %s\n", f.MakeEvents)
	fmt.Fprintf(&b, "  switch: old pair stopped (SIGTERM) in %s (SIGKILL needed: %v), new pair ready in %s\n",
		f.Stop.Round(time.Millisecond), f.Killed, f.Start.Round(time.Millisecond))
	fmt.Fprintf(&b, "  quiet window (%s, in-flight calls held by the driver): %g contract writes (%d changed in-flight objects, %d ready ones, %g changed nothing), %g events, %g other [%s]\n",
		f.Window, f.WindowWrites.Total(isContract), f.WindowInflightChanges, f.WindowReadyChanges, f.WindowForNothing,
		f.WindowWrites.Total(isEvent), f.WindowWrites.Total(isOther), f.WindowWrites)
	fmt.Fprintf(&b, "  in-flight ready %s after the new pair's start (%s after the SIGTERM; the driver held the calls for up to %s)\n",
		f.FinishM.Round(time.Millisecond), f.Switch.Round(time.Millisecond), f.Hang)
	fmt.Fprintf(&b, "  writes by the new pair from its start to quiet: %g contract (%s per in-flight snapshot; %d changed an object, %g changed nothing), %g events [%s]; ready-snapshot objects changed: %d\n",
		f.SwitchWrites.Total(isContract), perSnapshot(f.SwitchWrites.Total(isContract), f.inflight()), f.SwitchChanges, f.SwitchForNothing,
		f.SwitchWrites.Total(isEvent), f.SwitchWrites, len(f.ReadyChanged))
	fmt.Fprintf(&b, "  CSI calls by the new pair: %s; about ready snapshots: %d; CreateSnapshot for in-flight: %d (at most %d per snapshot); backend holds %d\n",
		f.Calls, f.CreatesReady, f.CreatesInflight, f.MaxCreates, f.BackendAfter)
	fmt.Fprintf(&b, "  deleted %d under the new pair in %s: %g controller writes, %g events [%s]; calls: %s; backend == contents: %v\n",
		f.Deleted, f.DeleteTime.Round(time.Millisecond), f.DeleteWrites.Total(isContract), f.DeleteWrites.Total(isEvent), f.DeleteWrites, f.DeleteCalls, f.Leak)
	fmt.Fprintf(&b, "  test wall time %s", f.Wall.Round(time.Millisecond))
	if len(f.Failures) > 0 {
		fmt.Fprintf(&b, "\n  FAILED CHECKS (%d):\n    %s", len(f.Failures), strings.Join(f.Failures, "\n    "))
	}
	t.Log(b.String())
	if path := os.Getenv("SNAPKEEPER_MIGRATION_REPORT"); path != "" {
		if err := f.appendMarkdown(path); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}

// appendMarkdown appends one table row (see docs/migration.md for the header).
func (f *figures) appendMarkdown(path string) error {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	result := "pass"
	if len(f.Failures) > 0 {
		result = fmt.Sprintf("**%d failed checks**", len(f.Failures))
	}
	_, err = fmt.Fprintf(fh, "| %s → %s | %s | %d / %d | %s | %s / %s | %g (%d in-flight changes, %g for nothing) | %d | %s | %g (%s each) | %d / %d | %d in %s, %g writes, leak-free: %v | %s | %s |\n",
		f.From, f.To, f.Naming, f.N, f.inflight(),
		f.MakeN.Round(100*time.Millisecond),
		f.Stop.Round(100*time.Millisecond), f.Start.Round(100*time.Millisecond),
		f.WindowWrites.Total(isContract), f.WindowInflightChanges, f.WindowForNothing, len(f.ReadyChanged),
		f.FinishM.Round(100*time.Millisecond),
		f.SwitchWrites.Total(isContract), perSnapshot(f.SwitchWrites.Total(isContract), f.inflight()),
		f.CreatesReady, f.CreatesInflight,
		f.Deleted, f.DeleteTime.Round(100*time.Millisecond), f.DeleteWrites.Total(isContract), f.Leak,
		f.Wall.Round(time.Second), result)
	return err
}

func joinLines(s []string) string { return strings.Join(firstN(s, 20), "\n  ") }
