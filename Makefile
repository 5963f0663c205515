# snapkeeper: build, test, run and benchmark against real parts.
# Third-party binaries are built once from pinned modules under hack/tools
# into bin/ and reused; `make clean-tools` forces a rebuild.

SHELL        := /bin/bash
GO           ?= go
BIN          := bin
ABS_BIN      := $(CURDIR)/bin
CRD_DIR      := charts/snapkeeper/files/crds
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      := -X github.com/snapkeeper/snapkeeper/pkg/version.Version=$(VERSION)
TEST_TIMEOUT ?= 45m
BENCH_N      ?= 500

KUBE_TOOLS := $(BIN)/kube-apiserver $(BIN)/kubectl $(BIN)/etcd
TOOLS      := $(KUBE_TOOLS) $(BIN)/mock-csi-driver $(BIN)/helm $(BIN)/controller-gen $(BIN)/crdfix

.PHONY: all build test unit e2e run bench lint tools crds check-crds clean clean-tools

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(ABS_BIN)/ ./cmd/...

tools: $(TOOLS)

# One `go build` for the three so the shared k8s packages compile once.
$(KUBE_TOOLS) &: hack/tools/kube/go.mod hack/tools/kube/go.sum hack/tools/kube/etcd/main.go
	cd hack/tools/kube && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" -o $(ABS_BIN)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd
	touch $(KUBE_TOOLS)

$(BIN)/mock-csi-driver: hack/tools/kube/go.mod hack/tools/kube/go.sum $(wildcard hack/tools/kube/mockcsi/*.go)
	cd hack/tools/kube && $(GO) build -o $(ABS_BIN)/mock-csi-driver ./mockcsi

$(BIN)/helm: hack/tools/helm/go.mod hack/tools/helm/go.sum
	cd hack/tools/helm && $(GO) build -ldflags "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37" -o $(ABS_BIN)/helm helm.sh/helm/v3/cmd/helm

$(BIN)/controller-gen: hack/tools/controller-gen/go.mod hack/tools/controller-gen/go.sum
	cd hack/tools/controller-gen && $(GO) build -o $(ABS_BIN)/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen

$(BIN)/crdfix: hack/tools/controller-gen/go.mod hack/tools/controller-gen/go.sum hack/tools/controller-gen/crdfix/main.go
	cd hack/tools/controller-gen && $(GO) build -o $(ABS_BIN)/crdfix ./crdfix

# CRDs: controller-gen over the client/v8 API types, then crdfix closes the
# known gaps to the module's own manifests (see crdfix/main.go).
crds: $(BIN)/controller-gen $(BIN)/crdfix
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	moddir=$$(cd hack/tools/controller-gen && $(GO) list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8) && \
	cd hack/tools/controller-gen && \
	$(ABS_BIN)/controller-gen crd paths=github.com/kubernetes-csi/external-snapshotter/client/v8/apis/... output:crd:dir=$$tmp && \
	cd $(CURDIR) && rm -f $(CRD_DIR)/*.yaml && \
	$(ABS_BIN)/crdfix -generated $$tmp -reference $$moddir/config/crd -out $(CRD_DIR)
	@ls $(CRD_DIR)

# Fails when the committed CRDs differ from a fresh generation.
check-crds: crds
	git diff --exit-code -- $(CRD_DIR)

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/)

e2e: tools
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/...

# The whole suite: unit tests, then end-to-end tests on real parts.
test: tools
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# A local control plane with the webhook, the controller and the mock CSI
# driver; prints the KUBECONFIG to use; Ctrl-C stops everything.
run: tools
	$(GO) build -o $(ABS_BIN)/snapkeeper-run ./hack/run
	$(ABS_BIN)/snapkeeper-run

# The community pair the benchmark runs next to ours (external-snapshotter
# v8.6.0, k8s.io modules aligned to v0.37.2): one `go build` for both.
$(BIN)/snapshot-controller $(BIN)/csi-snapshotter &: hack/tools/peers/go.mod hack/tools/peers/go.sum
	cd hack/tools/peers && $(GO) build -o $(ABS_BIN)/ github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter
	touch $(BIN)/snapshot-controller $(BIN)/csi-snapshotter

# Side-by-side benchmark (docs/benchmarks.md); BENCH_ARGS adds flags, e.g.
# BENCH_ARGS="-community-default-n=100" (see `go run ./test/bench -h`).
bench: tools $(BIN)/snapshot-controller $(BIN)/csi-snapshotter
	$(GO) run ./test/bench -n $(BENCH_N) -out docs/benchmarks.md $(BENCH_ARGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd hack/tools/kube && $(GO) vet ./...
	@if [ -x $(BIN)/staticcheck ]; then $(BIN)/staticcheck ./...; else echo "staticcheck not built: make $(BIN)/staticcheck"; fi

$(BIN)/staticcheck:
	GOBIN=$(ABS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

clean:
	rm -f $(BIN)/snapkeeper-* $(BIN)/controller $(BIN)/webhook

clean-tools:
	rm -rf $(BIN)
