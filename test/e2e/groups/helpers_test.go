package groups

import (
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// world is one test's framework.Scenario: a driver named group-*, no
// VolumeSnapshotClass, a default group class of its driver, and a
// controller running both components with no --feature-gates (group
// snapshots are on by default, as in v8.7.0); the group helpers are the
// Scenario's (test/framework/scenario_groups.go).
type world struct{ *framework.Scenario }

// newWorld takes the Scenario's Faults, ClaimSizes and Policy.
func newWorld(t *testing.T, o framework.ScenarioOptions) *world {
	t.Helper()
	o.DriverPrefix, o.NoClass, o.GroupClass = "group", true, true
	return &world{framework.NewScenario(t, o)}
}

// pvc creates claim name with labels.
func (w *world) pvc(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	w.PVC(t, name)
	w.label(t, name, labels)
}

// groupDeletesNamedTheirMembers checks that every DeleteVolumeGroupSnapshot
// the driver received named exactly n snapshot ids (the field is required by
// the CSI spec), and that there was at least one.
func (w *world) groupDeletesNamedTheirMembers(t *testing.T, n int) {
	t.Helper()
	seen := 0
	for _, e := range w.Drv.CallLog(t, 0).Entries {
		if e.Method != "DeleteVolumeGroupSnapshot" {
			continue
		}
		seen++
		if len(e.SnapshotIDs) != n {
			t.Errorf("DeleteVolumeGroupSnapshot %s named snapshot ids %v, want the %d members", e.GroupSnapshotID, e.SnapshotIDs, n)
		}
	}
	if seen == 0 {
		t.Error("no DeleteVolumeGroupSnapshot reached the driver")
	}
}
