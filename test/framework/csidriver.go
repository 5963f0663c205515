package framework

import (
	"github.com/snapkeeper/snapkeeper/pkg/csi/csitest"
)

// MockDriverName is the driver name the mock CSI driver reports by default.
const MockDriverName = csitest.DriverName

// The mock CSI driver (the Kubernetes e2e mock service behind our
// fault-injecting, serializing gRPC wrapper) is driven by one harness,
// pkg/csi/csitest; these are its names in the framework. A CSIDriver can be
// stopped, crashed and started again on the same socket (Crash, Start,
// Restart); its HTTP API comes with a test (Calls(t), Created(t), ...) and
// without (GetCalls(ctx), GetCreated(ctx), ...). FaultRule and the backend
// types are the Go mirror of that API (see
// hack/tools/kube/mockcsi/faults.go for the meaning of a fault).
type (
	CSIDriver        = csitest.Mock
	CSIDriverOptions = csitest.Options
	Faults           = csitest.Faults
	FaultRule        = csitest.Rule
	Duration         = csitest.Duration
	BackendSnapshot  = csitest.BackendSnapshot
	BackendGroup     = csitest.BackendGroup
	CallLog          = csitest.CallLog
	CallLogEntry     = csitest.CallLogEntry
)

// StartCSIDriver starts the mock driver with its log in a fresh directory
// of the control plane's; t.Cleanup stops it and fails the test if it did
// not exit cleanly. Without the driver binary the test is skipped, or fails
// with SNAPKEEPER_REQUIRE_MOCK_CSI=1.
func (e *Env) StartCSIDriver(t T, o CSIDriverOptions) *CSIDriver {
	t.Helper()
	return csitest.StartMockIn(t, e.TempDir(t, "csi"), o)
}

// StartCSIDriver starts the mock driver with its log in dir, for callers
// without a test (`make run`, benchmarks); they must Stop it.
func StartCSIDriver(dir string, o CSIDriverOptions) (*CSIDriver, error) {
	return csitest.Launch(dir, o)
}
