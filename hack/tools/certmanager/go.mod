// Pins the cert-manager module, whose deploy/crds the chart's e2e tests
// install on the test API server (certificates.mode=certManager). Nothing is
// built from it: test/e2e/chart finds the module with `go mod download -json`.
module github.com/snapkeeper/snapkeeper/hack/tools/certmanager

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
