//go:build tools

// Package tools pins promtool (module github.com/prometheus/prometheus
// v0.316.0, Prometheus 3.16.0) for the monitoring checks of
// test/e2e/metrics: `promtool check rules` and `test rules` on the chart's
// PrometheusRule, `promtool check metrics` on real scrapes of our binaries.
// ./promql-series (built as bin/promql-series) uses the same module's
// PromQL parser.
//
// `make bin/promtool bin/promql-series` builds both in one `go build` with
// -tags remove_all_sd: Prometheus' plugins/ package then registers only the
// file and HTTP service discoveries, none of the cloud ones, which promtool
// does not need here. promtool's main package still imports the Kubernetes
// discovery itself (for `check config`; the tag does not reach that
// import), so client-go stays in the build: every k8s.io module is raised
// from v0.37.1 to v0.37.2, the version of the product and the other tools
// modules. It compiles unchanged: no replace. The module's go line is
// 1.26.7 because Prometheus v0.316.0's go.mod asks for it (the other tools
// modules say 1.26.0).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
