package version

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// NewCollector returns the snapkeeper_build_info gauge: always 1, labelled
// with the version, the commit and the Go version of the binary. Register it
// once per registry:
//
//	reg.MustRegister(version.NewCollector())
func NewCollector() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "snapkeeper_build_info",
		Help: "Build information of this binary: version, commit (revision) and Go version; always 1.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(Version, GetRevision(), runtime.Version()).Set(1)
	return g
}
