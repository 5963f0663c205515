package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	oldV, oldR := Version, Revision
	t.Cleanup(func() { Version, Revision = oldV, oldR })
	Version, Revision = "v1.2.3", "0123abc"
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector())
	want := `# HELP snapkeeper_build_info Build information of this binary: version, commit (revision) and Go version; always 1.
# TYPE snapkeeper_build_info gauge
snapkeeper_build_info{goversion="` + runtime.Version() + `",revision="0123abc",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "snapkeeper_build_info"); err != nil {
		t.Fatal(err)
	}
}

func TestGetRevisionFallback(t *testing.T) {
	old := Revision
	t.Cleanup(func() { Revision = old })
	Revision = ""
	if GetRevision() == "" {
		t.Fatal("empty revision")
	}
}
