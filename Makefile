# snapkeeper: build, test, run and benchmark against real parts.
# Third-party binaries are built once from pinned modules under hack/tools
# into bin/ and reused; `make clean-tools` forces a rebuild.

SHELL        := /bin/bash
GO           ?= go
BIN          := bin
ABS_BIN      := $(CURDIR)/bin
CRD_DIR      := charts/snapkeeper/files/crds
# One version for binaries, images and the chart (hack/version.sh,
# docs/releases.md); REVISION is the commit.
VERSION      ?= $(shell hack/version.sh)
REVISION     ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS      := -X github.com/snapkeeper/snapkeeper/pkg/version.Version=$(VERSION) -X github.com/snapkeeper/snapkeeper/pkg/version.Revision=$(REVISION)
TEST_TIMEOUT ?= 45m
# The full fault suite runs over an hour (the production-plane scenarios
# alone about 45 minutes, TestProdTwoFaults 30 of them).
FAULTS_TIMEOUT ?= 150m
BENCH_N      ?= 500

# Every Go build here is static (CGO_ENABLED=0): the binaries the process
# planes run are the ones the node plane's images carry, each package
# compiled once for both (`make unit` turns cgo back on: the race detector
# needs it; `make release` sets its own).
CGO_ENABLED ?= 0
export CGO_ENABLED
HOST_ARCH = $(shell $(GO) env GOARCH)

PROM_TOOLS := $(BIN)/promtool $(BIN)/promql-series
KUBE_TOOLS := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kubectl $(BIN)/kubelet $(BIN)/kube-scheduler $(BIN)/kube-proxy $(BIN)/etcd
TOOLS      := $(KUBE_TOOLS) $(BIN)/csi-provisioner $(BIN)/mock-csi-driver $(BIN)/helm $(BIN)/controller-gen $(BIN)/crdfix $(PROM_TOOLS)

PEERS      := $(BIN)/snapshot-controller $(BIN)/csi-snapshotter
# The community release every suite runs next to ours: the one place that
# names it is hack/tools/peers/go.mod (test/framework.CommunityVersion reads
# it too); docs/testing.md, "When the community releases".
# $(call peer_version,DIR): the release hack/tools/DIR/go.mod requires.
peer_version = $(shell awk '$$1=="require" && $$2=="github.com/kubernetes-csi/external-snapshotter/v8" {print $$3}' hack/tools/$(1)/go.mod)
COMMUNITY_VERSION := $(call peer_version,peers)

.PHONY: node-tools node-images node-images-short test-node test-node-short check-mods check-drift test-backup test-gitops
.PHONY: test-migration-previous
.PHONY: all build test vet lint-static own-binaries unit fuzz fuzz-short test-tools e2e test-monitoring test-k8s-floor test-faults test-upgrade conformance run bench bench-coldstart bench-schedules bench-scale lint tools crds check-crds clean clean-tools

all: build

# Our binaries, named as in the image and the chart: snapkeeper-controller,
# snapkeeper-webhook, and snapctl.
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(ABS_BIN)/snapkeeper-controller ./cmd/controller
	$(GO) build -ldflags '$(LDFLAGS)' -o $(ABS_BIN)/snapkeeper-webhook ./cmd/webhook
	$(GO) build -ldflags '$(LDFLAGS)' -o $(ABS_BIN)/snapctl ./cmd/snapctl

tools: $(TOOLS)

# One `go build` for the Kubernetes binaries and etcd so the shared k8s
# packages compile once. The controller-manager serves the cluster-like
# plane (test/framework's ControlPlaneOptions.Cluster, `make run`); kubelet,
# kube-scheduler and kube-proxy the node plane (`make test-node`; about a
# minute of compiling more). KUBE_LDFLAGS set the version they report (a
# module build has no git).
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37
$(KUBE_TOOLS) &: hack/tools/kube/go.mod hack/tools/kube/go.sum hack/tools/kube/etcd/main.go
	cd hack/tools/kube && $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o $(ABS_BIN)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy ./etcd
	touch $(KUBE_TOOLS)

# The oldest supported Kubernetes (docs/kubernetes-versions.md): only its
# kube-apiserver, from hack/tools/kube-floor; etcd and kubectl stay the ones
# above. `make test-k8s-floor` runs the smoke, webhook, startup and chart
# suites against it.
KUBE_FLOOR_VERSION := v1.30.14
KUBE_FLOOR         := 1.30
KUBE_FLOOR_APISERVER := $(BIN)/kube-apiserver-$(KUBE_FLOOR)

$(KUBE_FLOOR_APISERVER): hack/tools/kube-floor/go.mod hack/tools/kube-floor/go.sum
	cd hack/tools/kube-floor && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=$(KUBE_FLOOR_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_FLOOR)))" -o $(ABS_BIN)/kube-apiserver-$(KUBE_FLOOR) k8s.io/kubernetes/cmd/kube-apiserver

test-k8s-floor: $(KUBE_FLOOR_APISERVER) $(BIN)/etcd $(BIN)/kubectl $(BIN)/helm
	SNAPKEEPER_KUBE_APISERVER=$(ABS_BIN)/kube-apiserver-$(KUBE_FLOOR) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(FLOOR_ARGS) ./test/e2e/smoke ./test/e2e/webhook ./test/e2e/startup ./test/e2e/chart

# The real csi-provisioner (external-provisioner v6.4.0, k8s.io modules
# aligned to v0.37.2) that provisions and restores claims on the
# cluster-like plane; its own module (hack/tools/provisioner/tools.go).
$(BIN)/csi-provisioner: hack/tools/provisioner/go.mod hack/tools/provisioner/go.sum
	cd hack/tools/provisioner && $(GO) build -ldflags "-X main.version=v6.4.0" -o $(ABS_BIN)/csi-provisioner github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner

$(BIN)/mock-csi-driver: hack/tools/kube/go.mod hack/tools/kube/go.sum $(wildcard hack/tools/kube/mockcsi/*.go)
	cd hack/tools/kube && $(GO) build -o $(ABS_BIN)/mock-csi-driver ./mockcsi

$(BIN)/helm: hack/tools/helm/go.mod hack/tools/helm/go.sum
	cd hack/tools/helm && $(GO) build -ldflags "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" -o $(ABS_BIN)/helm helm.sh/helm/v3/cmd/helm

# promtool (module v0.316.0, Prometheus 3.16.0) and our promql-series,
# which parses PromQL with the same module's parser: one `go build` so they
# share compilation; remove_all_sd leaves Prometheus' cloud service
# discoveries out (hack/tools/promtool/tools.go). test/e2e/metrics checks the chart's
# alerts, its dashboard and real scrapes with them (docs/metrics.md).
$(PROM_TOOLS) &: hack/tools/promtool/go.mod hack/tools/promtool/go.sum hack/tools/promtool/promql-series/main.go
	cd hack/tools/promtool && $(GO) build -tags remove_all_sd -ldflags "-X github.com/prometheus/common/version.Version=3.16.0" -o $(ABS_BIN)/ github.com/prometheus/prometheus/cmd/promtool ./promql-series
	touch $(PROM_TOOLS)

$(BIN)/controller-gen: hack/tools/controller-gen/go.mod hack/tools/controller-gen/go.sum
	cd hack/tools/controller-gen && $(GO) build -o $(ABS_BIN)/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/crdfix: hack/tools/controller-gen/go.mod hack/tools/controller-gen/go.sum hack/tools/controller-gen/crdfix/main.go
	cd hack/tools/controller-gen && $(GO) build -o $(ABS_BIN)/crdfix ./crdfix

# CRDs: controller-gen over the client/v8 API types, then crdfix closes the
# known gaps to the module's own manifests (see crdfix/main.go); then our own
# API (pkg/apis: the SnapshotSchedule), its CRD and its deep copies.
crds: $(BIN)/controller-gen $(BIN)/crdfix
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	moddir=$$(cd hack/tools/controller-gen && $(GO) list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8) && \
	cd hack/tools/controller-gen && \
	$(ABS_BIN)/controller-gen crd paths=github.com/kubernetes-csi/external-snapshotter/client/v8/apis/... output:crd:dir=$$tmp && \
	cd $(CURDIR) && rm -f $(CRD_DIR)/*.yaml && \
	$(ABS_BIN)/crdfix -generated $$tmp -reference $$moddir/config/crd -out $(CRD_DIR) && \
	$(ABS_BIN)/controller-gen object crd paths=./pkg/apis/... output:crd:dir=$(CRD_DIR)
	@ls $(CRD_DIR)

# Fails when the committed CRDs differ from a fresh generation.
check-crds: crds
	git diff --exit-code -- $(CRD_DIR) pkg/apis

# Unit tests with the race detector (everything outside test/).
unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/)

# Every Go fuzz target (the webhook's decoders and handler, the rules, the
# manifest reader) for FUZZTIME each; prints the executions per target and
# whether anything was found (hack/fuzz.sh). A crasher lands under the
# package's testdata/fuzz/ and stays there as a regression seed.
FUZZTIME ?= 60s
fuzz:
	GO=$(GO) hack/fuzz.sh $(FUZZTIME)

# The short variant `make test` runs: 5 s per target.
fuzz-short:
	GO=$(GO) hack/fuzz.sh 5s

# The test driver's own tests (a separate module under hack/tools/kube).
test-tools: tools
	cd hack/tools/kube && $(GO) test -count=1 ./mockcsi/...

# End-to-end tests; test/conformance runs its short catalogue against the
# community peers, test/faults its short seeded variant (docs/faults.md).
# FAULT_SEED=<n> replays the fault suite's random choices.
e2e: tools $(PEERS) own-binaries
	SNAPKEEPER_OWN_BINARIES=$(ABS_BIN)/own $(if $(FAULT_SEED),SNAPKEEPER_FAULT_SEED=$(FAULT_SEED)) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/...

# The modules `make test` builds agree on every dependency they share, so
# the build cache compiles each once (hack/alignmods; -w aligns them).
check-mods:
	$(GO) run ./hack/alignmods

# What the community release of hack/tools/peers/go.mod declares (feature
# gates, flags, CRDs, RBAC) against ours; each intended difference is listed
# with its reason in hack/drift/known.yaml (docs/testing.md).
check-drift:
	$(GO) run ./hack/drift

# Our commands for the e2e packages, linked once instead of once per test
# process (test/framework OwnBinary, $$SNAPKEEPER_OWN_BINARIES), with the
# version stamp: the node plane's image carries these same binaries.
own-binaries:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(ABS_BIN)/own/ ./cmd/controller ./cmd/webhook ./cmd/snapctl

# The monitoring checks alone (docs/metrics.md, "Checking alerts, dashboard
# and metrics"): promtool on the chart's PrometheusRule and its unit tests,
# promtool check metrics on real scrapes, and the series the alerts and the
# Grafana dashboard read. `make e2e` runs them too.
test-monitoring: $(KUBE_TOOLS) $(BIN)/mock-csi-driver $(BIN)/helm $(PROM_TOOLS)
	$(GO) test -count=1 -timeout 10m -run 'Promtool|Alert|Series' ./test/e2e/metrics

# The fault-injection suite at full size (docs/faults.md); FAULT_SEED=<n>
# replays a run, FAULTS_ARGS adds `go test` flags, e.g. -run.
test-faults: tools
	SNAPKEEPER_REQUIRE_MOCK_CSI=1 SNAPKEEPER_FAULTS=full $(if $(FAULT_SEED),SNAPKEEPER_FAULT_SEED=$(FAULT_SEED)) $(GO) test -count=1 -v -timeout $(FAULTS_TIMEOUT) $(FAULTS_ARGS) ./test/faults

# The upgrade from the previous release (hack/previous-release) to this
# tree, alone (`make e2e` runs it too, skipping it in a clone without the
# release's commit; here that fails). docs/releases.md, "Upgrades".
test-upgrade: $(KUBE_TOOLS) $(BIN)/mock-csi-driver $(BIN)/helm
	SNAPKEEPER_REQUIRE_UPGRADE=1 SNAPKEEPER_REQUIRE_MOCK_CSI=1 $(GO) test -count=1 -v -timeout 15m -run '^TestUpgradeFromPreviousRelease$$' ./test/e2e/upgrade

# The whole suite, as CI runs it: lint, CRD freshness, unit tests with the
# race detector, 5 s of each fuzz target, the test driver's tests, and the
# end-to-end tests on real parts. A missing mock driver fails instead of
# skipping. hack/test.sh schedules the steps for two cores (the e2e tests in
# the foreground, the CPU-only steps niced beside them) and prints each
# step's wall and CPU time (docs/testing.md).
test:
	MAKE="$(MAKE)" GO="$(GO)" hack/test.sh

# The full differential conformance catalogue (docs/compatibility.md): every
# scenario against the four pairings of our and the community binder and
# CSI side. CONFORMANCE_ARGS adds `go test` flags, e.g. -v.
conformance: tools $(PEERS)
	SNAPKEEPER_CONFORMANCE=full $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(CONFORMANCE_ARGS) ./test/conformance

# A local control plane with the webhook, the controller and the mock CSI
# driver; prints the KUBECONFIG to use; Ctrl-C stops everything.
run: tools
	$(GO) build -o $(ABS_BIN)/snapkeeper-run ./hack/run
	$(ABS_BIN)/snapkeeper-run

# The community pair the suites run next to ours (external-snapshotter
# $(COMMUNITY_VERSION), k8s.io modules aligned to v0.37.2): one `go build` for both.
$(PEERS) &: hack/tools/peers/go.mod hack/tools/peers/go.sum
	cd hack/tools/peers && $(GO) build -ldflags "-X main.version=$(COMMUNITY_VERSION)" -o $(ABS_BIN)/ github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter
	touch $(BIN)/snapshot-controller $(BIN)/csi-snapshotter

# The community release before COMMUNITY_VERSION, which clusters moving to
# us may still run (its group snapshot gate was beta and off by default),
# pinned in hack/tools/peers-previous (not part of `make test`, nor of
# hack/alignmods): its pair as bin/<name>-$(PREVIOUS_COMMUNITY_VERSION), one
# `go build` into a scratch directory, then renamed.
PREVIOUS_COMMUNITY_VERSION := $(call peer_version,peers-previous)
PREVIOUS_PEERS := $(BIN)/snapshot-controller-$(PREVIOUS_COMMUNITY_VERSION) $(BIN)/csi-snapshotter-$(PREVIOUS_COMMUNITY_VERSION)
$(PREVIOUS_PEERS) &: hack/tools/peers-previous/go.mod hack/tools/peers-previous/go.sum
	mkdir -p $(ABS_BIN)
	tmp=$$(mktemp -d $(ABS_BIN)/.peers-previous.XXXXXX) && trap 'rm -rf $$tmp' EXIT && \
	cd hack/tools/peers-previous && $(GO) build -ldflags "-X main.version=$(PREVIOUS_COMMUNITY_VERSION)" -o $$tmp/ github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter && \
	mv $$tmp/snapshot-controller $(ABS_BIN)/snapshot-controller-$(PREVIOUS_COMMUNITY_VERSION) && \
	mv $$tmp/csi-snapshotter $(ABS_BIN)/csi-snapshotter-$(PREVIOUS_COMMUNITY_VERSION)
	touch $(PREVIOUS_PEERS)

# test/e2e/migration against that release instead of COMMUNITY_VERSION
# (SNAPKEEPER_COMMUNITY=previous: test/framework picks the binaries and
# CommunityVersion); `make test` and `make e2e` run it against
# COMMUNITY_VERSION. docs/migration.md. MIGRATION_ARGS adds `go test` flags.
test-migration-previous: tools $(PREVIOUS_PEERS) own-binaries
	SNAPKEEPER_COMMUNITY=previous SNAPKEEPER_REQUIRE_MOCK_CSI=1 SNAPKEEPER_OWN_BINARIES=$(ABS_BIN)/own $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(MIGRATION_ARGS) ./test/e2e/migration

# Side-by-side benchmark (docs/benchmarks.md) on a production-like control
# plane: etcd syncs every write, kube-apiserver keeps its default APF and
# inflight limits, and every controller runs as its own ServiceAccount under
# the RBAC it ships with. Ours and the community pair (defaults, tuned, and
# at our client limits) run 3 times each, interleaved; the commit is
# recorded and a dirty tree is refused (-allow-dirty overrides, and says so).
# The community pair at its defaults (QPS 5) is measured at 100 snapshots and
# extrapolated (-community-default-n; 500 would take 3 x 23 min). Then one
# snapshot alone (-single=50), the slow driver (-waiting=5s-30s), the steady
# restart, 100 groups of 10 claims, the admission latency and the scale runs
# (-scale=500,5000,20000 for ours, the empty controller and community-equal,
# every N created through the system). About two hours here; BENCH_ARGS="-waiting= -scale="
# skips the long parts, -baseline=<commit> adds our controller as built at
# that commit (see `go run ./test/bench -h` for every flag). The cold start
# over 100,000 seeded snapshots (kube-apiserver then needs ~7 GiB, half an
# hour of seeding) is its own target and report: make bench-coldstart.
# The scale runs take CPU profiles of kube-apiserver, etcd and our
# processes (-profile, files in bin/profiles) and write where each
# operation's time goes; `make bench-scale` runs that stage alone.
BENCH_ARGS ?= -community-default-n=100 -cold-start-m=0
PROFILE_DIR ?= bin/profiles
bench: tools $(PEERS)
	$(GO) run ./test/bench -n $(BENCH_N) -out docs/benchmarks.md -profile $(PROFILE_DIR) $(BENCH_ARGS)

bench-coldstart: tools $(PEERS)
	$(GO) run ./test/bench -systems= -single=0 -steady-m=0 -groups=0 -admission=false -waiting= -scale= -out docs/benchmarks-coldstart.md

# The schedule stages alone (make bench runs them too): one hourly schedule
# over 2,000 claims next to the same creates and deletes sent to the
# community pair, then a schedule's run over 100,000 seeded scheduled
# snapshots (about 25 minutes, most of it seeding); docs/benchmarks-schedules.md.
bench-schedules: tools $(PEERS)
	$(GO) run ./test/bench -systems= -single=0 -steady-m=0 -groups=0 -admission=false -waiting= -scale= -cold-start-m=0 -out docs/benchmarks-schedules.md

# The scale stage alone (make bench runs it too): ours, the empty
# controller (the same writes without logic: the API server's share) and
# the community pair at our limits, at SCALE_N snapshots each, created
# through the system, with CPU profiles of every process in PROFILE_DIR and
# the cost of each operation at each N; docs/benchmarks-scale.md. About an
# hour here, most of it the 20,000 runs.
# SCALE_REPEATS runs each N of each system that many times, interleaved.
SCALE_N ?= 500,5000,20000
SCALE_SYSTEMS ?= ours,writes-only,community-equal
SCALE_REPEATS ?= 1
bench-scale: tools $(PEERS)
	$(GO) run ./test/bench -systems= -single=0 -steady-m=0 -groups=0 -admission=false -waiting= -cold-start-m=0 -schedule-claims=0 -scale=$(SCALE_N) -scale-systems=$(SCALE_SYSTEMS) -scale-repeats=$(SCALE_REPEATS) -profile $(PROFILE_DIR) -out docs/benchmarks-scale.md

# gofmt, go vet (ours and the test driver's module) and staticcheck.
lint: vet lint-static

vet:
	$(GO) vet ./...

lint-static: $(BIN)/staticcheck
	@out=$$(git ls-files -co --exclude-standard '*.go' | while read -r f; do [ -f "$$f" ] && echo "$$f"; done | xargs gofmt -l); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	cd hack/tools/kube && $(GO) vet $$($(GO) list ./... | grep -v /e2estorage)
	$(BIN)/staticcheck ./...

# From its tools module, whose go.sum pins it: `go install ...@version` also
# needs the checksum database, which is not the module proxy.
$(BIN)/staticcheck: hack/tools/staticcheck/go.mod hack/tools/staticcheck/go.sum
	cd hack/tools/staticcheck && $(GO) build -o $(ABS_BIN)/staticcheck honnef.co/go/tools/cmd/staticcheck

# Removes what `make build`, `make run` and `make release` make; the tools stay (clean-tools).
clean:
	rm -f $(BIN)/snapkeeper-controller $(BIN)/snapkeeper-webhook $(BIN)/snapctl $(BIN)/snapkeeper-run
	rm -rf $(BIN)/release

clean-tools:
	rm -rf $(BIN)

# Releases: make release, image, sbom, licenses, chart, test-release
# (release.mk, docs/releases.md).
include release.mk

# After release.mk: the node images use its tool and image.
# A real node beside the control plane (test/framework/node.go): kubelet,
# kube-scheduler and kube-proxy are kube tools; e2e.test (Kubernetes' e2e
# suite with its external storage tests, hack/tools/kube/e2estorage) comes
# from the same module and cache. The images pods run are imported into
# containerd without a registry: ours from `make image`, the mock CSI
# driver, csi-provisioner, the community pair, and the busybox and pause
# images the e2e suite names (our busybox: hack/tools/kube/busybox).
# Binaries in images are static (CGO_ENABLED=0).
NODE_IMAGES := $(BIN)/node-images
NODE_STATIC := $(NODE_IMAGES)/static
node-tools: $(KUBE_TOOLS) $(BIN)/e2e.test $(BIN)/cert-manager
$(BIN)/e2e.test: hack/tools/kube/go.mod hack/tools/kube/go.sum $(wildcard hack/tools/kube/e2estorage/*.go)
	cd hack/tools/kube && $(GO) test -c -ldflags "$(KUBE_LDFLAGS)" -o $(ABS_BIN)/e2e.test ./e2estorage

# cert-manager's own controllers and CA injector, wired by a small main of
# ours (its command modules are not served here), for the certManager mode.
$(BIN)/cert-manager: hack/tools/certmanager/go.mod hack/tools/certmanager/go.sum hack/tools/certmanager/cert-manager/main.go
	cd hack/tools/certmanager && $(GO) build -o $(ABS_BIN)/cert-manager ./cert-manager

# The images of `make test`'s short node form (test-node-short), then the
# rest for the whole node suite. Binaries already built for the process
# planes (static, as every build here) are packed as they are: the mock
# CSI driver, csi-provisioner, the community pair and ours (own-binaries).
NODE_SHORT_IMAGES := $(addprefix $(NODE_IMAGES)/,pause.tar podtool.tar snapkeeper.tar mock-csi-driver.tar csi-provisioner.tar)
node-images-short: $(NODE_SHORT_IMAGES)
node-images: $(NODE_SHORT_IMAGES) $(addprefix $(NODE_IMAGES)/,snapshot-controller.tar csi-snapshotter.tar e2e-busybox.tar e2e-pause.tar previous.tar)
$(NODE_STATIC)/pause $(NODE_STATIC)/podtool $(NODE_STATIC)/busybox &: hack/tools/kube/go.mod hack/tools/kube/go.sum hack/tools/kube/pause/main.go hack/tools/kube/podtool/main.go hack/tools/kube/busybox/main.go
	cd hack/tools/kube && CGO_ENABLED=0 $(GO) build -o $(ABS_BIN)/node-images/static/ ./pause ./podtool ./busybox
	touch $(NODE_STATIC)/pause $(NODE_STATIC)/podtool $(NODE_STATIC)/busybox
$(NODE_IMAGES)/pause.tar: $(NODE_STATIC)/pause $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name snapkeeper.local/pause:1 -file $<:/pause -out $@
$(NODE_IMAGES)/podtool.tar: $(NODE_STATIC)/podtool $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name snapkeeper.local/podtool:1 -file $<:/podtool -user 65532:65532 -out $@
$(NODE_IMAGES)/mock-csi-driver.tar: $(BIN)/mock-csi-driver $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name snapkeeper.local/mock-csi-driver:1 -file $<:/usr/local/bin/mock-csi-driver -out $@
$(NODE_IMAGES)/csi-provisioner.tar: $(BIN)/csi-provisioner $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name snapkeeper.local/csi-provisioner:v6.4.0 -file $<:/csi-provisioner -out $@
$(NODE_IMAGES)/snapshot-controller.tar: $(BIN)/snapshot-controller $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name snapkeeper.local/snapshot-controller:$(COMMUNITY_VERSION) -file $<:/snapshot-controller -out $@
$(NODE_IMAGES)/csi-snapshotter.tar: $(BIN)/csi-snapshotter $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name snapkeeper.local/csi-snapshotter:$(COMMUNITY_VERSION) -file $<:/csi-snapshotter -out $@
# The e2e suite's images under the names it asks for (e2e.test
# -storage-images), already present so that nothing is pulled.
$(NODE_IMAGES)/e2e-busybox.tar: $(NODE_STATIC)/busybox $(BIN)/e2e.test $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name $$($(BIN)/e2e.test -storage-images | awk '$$1 == "busybox" {print $$2}') -file $<:/bin/busybox \
		$$(for a in $$($< --list); do printf -- '-link /bin/%s:busybox ' "$$a"; done) -entrypoint /bin/sh -out $@
$(NODE_IMAGES)/e2e-pause.tar: $(NODE_STATIC)/pause $(BIN)/e2e.test $(RELEASE_TOOL)
	$(RELEASE_TOOL) pack -name $$($(BIN)/e2e.test -storage-images | awk '$$1 == "pause" {print $$2}') -file $<:/pause -out $@
# Our image, the release image's layers and configuration for the host's
# platform (`make image` builds both platforms from release binaries),
# made of own-binaries' binaries, tagged ghcr.io/snapkeeper/snapkeeper:<version>
# and written straight to the tarball containerd imports; snapkeeper.ref
# holds the tag.
$(NODE_IMAGES)/snapkeeper.tar: own-binaries $(RELEASE_TOOL)
	@mkdir -p $(NODE_IMAGES)/own
	ln -sf ../../own/controller $(NODE_IMAGES)/own/snapkeeper-controller-linux-$(HOST_ARCH)
	ln -sf ../../own/webhook $(NODE_IMAGES)/own/snapkeeper-webhook-linux-$(HOST_ARCH)
	ln -sf ../../own/snapctl $(NODE_IMAGES)/own/snapctl-linux-$(HOST_ARCH)
	$(RELEASE_TOOL) image -bin $(NODE_IMAGES)/own -platforms linux/$(HOST_ARCH) -tarball $@ -name $(IMAGE_REPOSITORY):$(IMAGE_TAG) \
	  -version $(VERSION) -revision $(REVISION) -epoch $(SOURCE_DATE_EPOCH)
	echo $(IMAGE_TAG) >$(NODE_IMAGES)/snapkeeper.ref

# The previous release (hack/previous-release) as its users have it, for
# the node suite's helm upgrade and rollback: its source tree at the
# release's commit (previous/src, whose chart is installed), its two
# binaries built static with the release's version stamp, and its image
# under the default repository of that release's chart.
PREV_VERSION = $(shell sed -n 's/^version=//p' hack/previous-release)
PREV_COMMIT  = $(shell sed -n 's/^commit=//p' hack/previous-release)
$(NODE_IMAGES)/previous.tar: hack/previous-release $(RELEASE_TOOL)
	@git cat-file -e $(PREV_COMMIT)^{commit} || { echo "the previous release $(PREV_VERSION) ($(PREV_COMMIT)) is not in this clone: git fetch --unshallow (or git fetch origin $(PREV_COMMIT))"; exit 1; }
	rm -rf $(NODE_IMAGES)/previous && mkdir -p $(NODE_IMAGES)/previous/src
	git archive $(PREV_COMMIT) | tar -x -C $(NODE_IMAGES)/previous/src
	cd $(NODE_IMAGES)/previous/src && CGO_ENABLED=0 $(GO) build -buildvcs=false -o ../bin/ \
	  -ldflags "-X github.com/snapkeeper/snapkeeper/pkg/version.Version=$(PREV_VERSION) -X github.com/snapkeeper/snapkeeper/pkg/version.Revision=$(PREV_COMMIT)" \
	  ./cmd/controller ./cmd/webhook
	$(RELEASE_TOOL) pack -name ghcr.io/snapkeeper/snapkeeper:$(PREV_VERSION) -file $(NODE_IMAGES)/previous/bin/controller:/usr/local/bin/snapkeeper-controller \
	  -file $(NODE_IMAGES)/previous/bin/webhook:/usr/local/bin/snapkeeper-webhook -user 0:0 -out $@
	echo $(PREV_VERSION) >$(NODE_IMAGES)/previous.ref

# Velero v1.18 (server and CLI), its AWS plugin and an S3 server on
# loopback (hack/tools/velero), for the backup suite: not part of `make
# test`. `make test-backup` drives snapkeeper and the community pair with
# Velero (test/e2e/backup, docs/backup.md); BACKUP_ARGS adds `go test` flags.
VELERO_TOOLS := $(BIN)/velero $(BIN)/velero-plugin-for-aws $(BIN)/fakes3
$(VELERO_TOOLS) &: hack/tools/velero/go.mod hack/tools/velero/go.sum hack/tools/velero/fakes3/main.go
	cd hack/tools/velero && $(GO) build -ldflags "-X github.com/vmware-tanzu/velero/pkg/buildinfo.Version=v1.18.3" -o $(ABS_BIN)/ \
	  github.com/vmware-tanzu/velero/cmd/velero github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws ./fakes3
	touch $(VELERO_TOOLS)
test-backup: tools $(PEERS) own-binaries $(VELERO_TOOLS)
	SNAPKEEPER_BACKUP=1 SNAPKEEPER_REQUIRE_MOCK_CSI=1 SNAPKEEPER_OWN_BINARIES=$(ABS_BIN)/own $(GO) test -count=1 -v -timeout 40m $(BACKUP_ARGS) ./test/e2e/backup

# Flux's source-controller and kustomize-controller v1.9.6 (hack/tools/flux)
# and their CRDs (bin/flux-crds), for the GitOps suite: not part of `make
# test`. `make test-gitops` has Flux apply a git repository served on
# loopback (test/e2e/gitops, docs/gitops.md); GITOPS_ARGS adds `go test` flags.
FLUX_TOOLS := $(BIN)/source-controller $(BIN)/kustomize-controller
$(FLUX_TOOLS) &: hack/tools/flux/go.mod hack/tools/flux/go.sum
	cd hack/tools/flux && $(GO) build -o $(ABS_BIN)/ github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller
	rm -rf $(BIN)/flux-crds && mkdir -p $(BIN)/flux-crds
	cd hack/tools/flux && cp $$($(GO) list -m -f '{{.Dir}}' github.com/fluxcd/source-controller)/config/crd/bases/*.yaml \
	  $$($(GO) list -m -f '{{.Dir}}' github.com/fluxcd/kustomize-controller)/config/crd/bases/*.yaml $(ABS_BIN)/flux-crds/
	chmod u+w $(BIN)/flux-crds/*.yaml
	touch $(FLUX_TOOLS)
test-gitops: $(KUBE_TOOLS) $(BIN)/csi-provisioner $(BIN)/mock-csi-driver own-binaries $(FLUX_TOOLS)
	SNAPKEEPER_GITOPS=1 SNAPKEEPER_REQUIRE_MOCK_CSI=1 SNAPKEEPER_OWN_BINARIES=$(ABS_BIN)/own $(GO) test -count=1 -v -timeout 30m $(GITOPS_ARGS) ./test/e2e/gitops

# The node suites (test/node): the chart installed with helm on a real
# node, its pods Ready under Pod Security "restricted", the webhook
# reached through its Service. Installs the OS packages it needs
# (hack/node-deps.sh, root) and tears down what it created.
# TestNodeShort is left to test-node-short, which covers nothing the others
# do not.
NODE_TIMEOUT ?= 60m
NODE_ARGS ?= -skip '^TestNodeShort$$'
test-node: tools own-binaries node-tools node-images
	hack/node-deps.sh
	SNAPKEEPER_NODE=1 SNAPKEEPER_OWN_BINARIES=$(ABS_BIN)/own $(GO) test -count=1 -v -timeout $(NODE_TIMEOUT) $(NODE_ARGS) ./test/node/...

# The node form `make test` runs (test/node TestNodeShort, a few minutes):
# the chart on the node under Pod Security "restricted", our image as a
# driver's sidecar, a snapshot restored and a schedule's snapshot cut
# through pods, the webhook's denials through its Service, the host checked
# clean after. Only the kube tools `make tools` builds and five small
# images. hack/test.sh installs the node's packages in the background
# (NODE_DEPS=true here) and sets SNAPKEEPER_NODE=if-possible: without root
# or those packages the test says so in one line and passes.
NODE_DEPS ?= hack/node-deps.sh
NODE_SHORT_ARGS ?= -v
test-node-short: $(KUBE_TOOLS) $(BIN)/csi-provisioner $(BIN)/mock-csi-driver $(BIN)/helm own-binaries node-images-short
	$(NODE_DEPS)
	SNAPKEEPER_NODE=$${SNAPKEEPER_NODE:-1} SNAPKEEPER_OWN_BINARIES=$(ABS_BIN)/own $(GO) test -count=1 -timeout 15m -run '^TestNodeShort$$' $(NODE_SHORT_ARGS) ./test/node
