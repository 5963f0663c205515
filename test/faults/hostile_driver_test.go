package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/test/framework"
)

// TestHostileDriverMessage has the driver refuse CreateSnapshot with a
// 100 KiB message (a stack trace, a dump; the mock takes its faults on the
// command line, where one argument holds at most 128 KiB). The content and
// the snapshot must show the error cut to snapshot.MaxMessageBytes and
// saying so, with a Warning event; deleting the snapshot then works and
// leaves nothing behind.
func TestHostileDriverMessage(t *testing.T) {
	newRand(t)
	const head = "volume refused by the backend: "
	huge := head + strings.Repeat("at frame 0x7f00 in backend.cut() ", 100<<10/34)
	s := framework.NewScenario(t, framework.ScenarioOptions{DriverPrefix: "hostile", Faults: []framework.FaultRule{
		{Method: "CreateSnapshot", Code: "InvalidArgument", Message: huge},
	}})
	w := newWorld(s)
	env := s.Env
	s.PVC(t, "data")
	if err := w.create(context.Background(), "loud", "data"); err != nil {
		t.Fatal(err)
	}
	content := snapshot.ContentNameFor(w.uid("loud"))

	msg := expectContentError(t, env, content, time.Minute, head)
	if len(msg) > snapshot.MaxMessageBytes || !strings.Contains(msg, "bytes in all]") {
		t.Errorf("content error of %d bytes (limit %d), ending %q", len(msg), snapshot.MaxMessageBytes, msg[max(0, len(msg)-60):])
	}
	vsMsg := expectSnapshotError(t, env, s.NS, "loud", time.Minute, head)
	if vsMsg != msg {
		t.Errorf("the snapshot shows %d bytes, the content %d: want the content's error mirrored", len(vsMsg), len(msg))
	}
	expectWarning(t, env, "default", content, snapshot.ReasonCreationFailed)
	t.Logf("a %d-byte driver message: status errors of %d bytes", len(huge), len(msg))

	if err := w.remove(context.Background(), "loud"); err != nil {
		t.Fatal(err)
	}
	w.checkInvariants(t, time.Minute)
}
