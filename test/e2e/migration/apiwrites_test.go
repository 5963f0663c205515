package migration

import (
	"context"
	"strings"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// Writes are counted where they land, the API server's own
// apiserver_request_total (framework.APIWrites). Nothing but the
// controllers under test and the test itself writes to this control plane
// (no controller-manager, no scheduler), and the test's own writes happen
// outside the measured windows or are subtracted. The API server's own
// Lease renewals are left out entirely.

type (
	writeKey = framework.WriteKey
	writes   = framework.APIWrites
)

func isContract(k writeKey) bool { return framework.IsContractWrite(k) }
func isEvent(k writeKey) bool    { return framework.IsEventWrite(k) }
func isOther(k writeKey) bool    { return framework.IsOtherWrite(k) }
func notLease(k writeKey) bool   { return !strings.HasPrefix(k.Resource, "leases") }

func withoutLeases(w writes) writes {
	out := writes{}
	for k, v := range w {
		if notLease(k) {
			out[k] = v
		}
	}
	return out
}

// apiServer reads the API server's write counters.
type apiServer struct{ env *framework.Env }

func newAPIServer(env *framework.Env) *apiServer { return &apiServer{env: env} }

func (a *apiServer) writes(ctx context.Context) (writes, error) {
	w, err := a.env.APIWrites(ctx)
	return withoutLeases(w), err
}

// waitQuiet returns the write counters once they stood still for quiet, or
// an error after timeout.
func (a *apiServer) waitQuiet(ctx context.Context, quiet, timeout time.Duration) (writes, error) {
	w, err := a.env.WaitQuietWrites(ctx, notLease, quiet, timeout)
	return withoutLeases(w), err
}
