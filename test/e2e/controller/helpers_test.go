package controller

import (
	"testing"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// world is one test's world (framework.Scenario): a driver named e2e-*, a
// class for it, and a controller running both components.
type world struct{ *framework.Scenario }

func newWorld(t *testing.T, o framework.ScenarioOptions) *world {
	t.Helper()
	return &world{framework.NewScenario(t, o)}
}
