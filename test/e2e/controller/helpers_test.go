package controller

import (
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// setup is one test's world (framework.Scenario): a driver named e2e-*, a
// class for it, and a controller running both components.
type setup struct{ *framework.Scenario }

func newSetup(t *testing.T, o framework.ScenarioOptions) *setup {
	t.Helper()
	return &setup{framework.NewScenario(t, o)}
}
