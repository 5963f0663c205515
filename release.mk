# Release artifacts (docs/releases.md), included by the Makefile: static
# binaries, the OCI image layout (no container daemon: hack/tools/release
# assembles it with go-containerregistry), CycloneDX SBOMs, the license
# list, the packaged chart, the kubectl plugin archives with their krew
# manifest and SHA256SUMS, all under bin/release.

REL               := $(BIN)/release
ABS_REL           := $(ABS_BIN)/release
# The commit time: image creation, file times, tarball times.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# Registry tags and OCI chart tags cannot hold '+' (semver build metadata).
IMAGE_TAG         := $(subst +,_,$(VERSION))
CHART_VERSION     := $(patsubst v%,%,$(VERSION))
IMAGE_REPOSITORY  ?= ghcr.io/snapkeeper/snapkeeper
RELEASE_LDFLAGS   := -s -w -buildid= $(LDFLAGS)
LINUX_PLATFORMS   := linux-amd64 linux-arm64
DARWIN_PLATFORMS  := darwin-amd64 darwin-arm64
IMAGE_LAYOUT      := $(REL)/oci/snapkeeper
RELEASE_TOOL      := $(BIN)/snapkeeper-release
# Where the release's files are downloaded from: the krew manifest points
# each platform at $(KREW_URI_BASE)/kubectl-snapkeeper-<os>-<arch>.tar.gz.
KREW_URI_BASE     ?= https://github.com/snapkeeper/snapkeeper/releases/download/$(VERSION)
KREW_MANIFEST     := $(REL)/krew/snapkeeper.yaml
CYCLONEDX         := $(BIN)/cyclonedx-gomod
# The Go release that builds what we ship (docs/releases.md, "The Go
# toolchain"): GOTOOLCHAIN for the go commands of the release binaries
# (and so the image and the plugin archives) and of their SBOMs
# (cyclonedx-gomod records the Go of the go command it runs), nothing else:
# tests, tools and `make build` keep the machine's Go. The go command
# fetches this release from the Go module proxy (golang.org/toolchain,
# checked against the checksum database) once, into the module cache.
# Move it here, or for one build: make release RELEASE_GO_TOOLCHAIN=go1.x.y.
RELEASE_GO_TOOLCHAIN ?= go1.27.3

# name:package:platform for every binary we ship.
LINUX_BINS  := $(foreach p,$(LINUX_PLATFORMS),snapkeeper-controller:controller:$(p) snapkeeper-webhook:webhook:$(p) snapctl:snapctl:$(p))
DARWIN_BINS := $(foreach p,$(DARWIN_PLATFORMS),snapctl:snapctl:$(p))

.PHONY: version release-go-toolchain release release-binaries release-linux image sbom image-sbom licenses chart krew checksums test-release lint-release check-reproducible

version:
	@echo $(VERSION)

release-go-toolchain:
	@echo $(RELEASE_GO_TOOLCHAIN)

$(RELEASE_TOOL): hack/tools/release/go.mod hack/tools/release/go.sum $(wildcard hack/tools/release/*.go)
	cd hack/tools/release && $(GO) build -o $(ABS_BIN)/snapkeeper-release .

$(CYCLONEDX): hack/tools/release/go.mod hack/tools/release/go.sum
	cd hack/tools/release && $(GO) build -o $(ABS_BIN)/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

# One `go build` per binary and platform, with RELEASE_GO_TOOLCHAIN; the
# build cache makes a repeat cheap. Static (CGO_ENABLED=0), no paths
# (-trimpath), no build id.
define build-bins
	@set -e; for b in $(1); do \
	  IFS=: read -r name pkg plat <<<"$$b"; \
	  echo "go build $$name $$plat"; \
	  GOTOOLCHAIN=$(RELEASE_GO_TOOLCHAIN) CGO_ENABLED=0 GOOS=$${plat%-*} GOARCH=$${plat#*-} $(GO) build -trimpath \
	    -ldflags '$(RELEASE_LDFLAGS)' -o $(REL)/$$name-$$plat ./cmd/$$pkg; \
	done
endef

release-linux:
	$(call build-bins,$(LINUX_BINS))

release-binaries: release-linux
	$(call build-bins,$(DARWIN_BINS))

# The image index (linux/amd64, linux/arm64) as an OCI layout, tagged
# $(IMAGE_TAG); the digests land in $(IMAGE_LAYOUT).digests.
image: release-linux $(RELEASE_TOOL)
	$(RELEASE_TOOL) image -bin $(REL) -out $(IMAGE_LAYOUT) -version $(VERSION) \
	  -revision $(REVISION) -epoch $(SOURCE_DATE_EPOCH) -tag $(IMAGE_TAG)

# CycloneDX SBOM of every binary (cyclonedx-gomod app mode with the
# binary's GOOS/GOARCH, licenses detected from the module cache). Its go
# commands run RELEASE_GO_TOOLCHAIN, as the binaries' builds do: the std
# component and the GOVERSION property name the Go the binary was built with.
sbom: $(CYCLONEDX)
	@mkdir -p $(REL)/sbom
	@printf '%s\n' $(LINUX_BINS) $(DARWIN_BINS) | xargs -P 2 -I{} bash -c 'set -e; \
	  IFS=: read -r name pkg plat <<<"{}"; \
	  GOTOOLCHAIN=$(RELEASE_GO_TOOLCHAIN) CGO_ENABLED=0 GOOS=$${plat%-*} GOARCH=$${plat#*-} \
	    $(CYCLONEDX) app -json -std -licenses -assert-licenses -noserial -notimestamp \
	    -main cmd/$$pkg -output $(REL)/sbom/$$name-$$plat.cdx.json .; \
	  echo "sbom $$name-$$plat"'

# One SBOM per platform image, next to the layout (the image's binaries'
# components, the image manifest digest in the purl).
image-sbom: $(RELEASE_TOOL)
	$(RELEASE_TOOL) image-sbom -layout $(IMAGE_LAYOUT) -sbom $(REL)/sbom -repository $(IMAGE_REPOSITORY)

# docs/licenses.md from the binaries' SBOMs (make sbom first).
licenses: sbom $(RELEASE_TOOL)
	$(RELEASE_TOOL) licenses -out docs/licenses.md $(REL)/sbom/*.cdx.json

# The chart with version and appVersion set; appVersion is the image tag.
# File times are set to the commit time (helm stamps the packaging time).
chart: $(BIN)/helm $(RELEASE_TOOL)
	@mkdir -p $(REL) && rm -f $(REL)/snapkeeper-*.tgz
	$(BIN)/helm package charts/snapkeeper --version $(CHART_VERSION) --app-version $(IMAGE_TAG) -d $(REL)
	$(RELEASE_TOOL) normalize-tgz -epoch $(SOURCE_DATE_EPOCH) $(REL)/snapkeeper-$(CHART_VERSION).tgz

# The kubectl plugin: kubectl-snapkeeper-<os>-<arch>.tar.gz (snapctl named
# kubectl-snapkeeper, and LICENSE; commit-time file times) for every snapctl
# platform, and the krew manifest naming each by URL and sha256.
krew: release-binaries $(RELEASE_TOOL)
	$(RELEASE_TOOL) krew -bin $(REL) -out $(REL) -manifest $(KREW_MANIFEST) -license LICENSE \
	  -version $(VERSION) -uri-base $(KREW_URI_BASE) -epoch $(SOURCE_DATE_EPOCH) \
	  -platforms '$(LINUX_PLATFORMS) $(DARWIN_PLATFORMS)'

checksums:
	cd $(REL) && tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner \
	  -cf snapkeeper-image-oci.tar -C oci . && \
	  sha256sum snapkeeper-controller-* snapkeeper-webhook-* snapctl-* snapkeeper-*.tgz \
	    kubectl-snapkeeper-*.tar.gz krew/snapkeeper.yaml \
	    snapkeeper-image-oci.tar LICENSES.md sbom/*.cdx.json oci/*.cdx.json oci/*.digests > SHA256SUMS
	@cat $(REL)/SHA256SUMS

release: release-binaries image sbom image-sbom chart krew $(RELEASE_TOOL)
	$(RELEASE_TOOL) licenses -out $(REL)/LICENSES.md $(REL)/sbom/*.cdx.json
	$(MAKE) --no-print-directory checksums
	@cat $(IMAGE_LAYOUT).digests

# Pushes the image index and the chart to an in-process registry and pulls
# them back, checks that the chart's helm test Pod runs this image and the
# krew manifest's sums, and that every release binary, in bin/release and in
# the image, was built by RELEASE_GO_TOOLCHAIN (hack/tools/release/test);
# reuses bin/release when it is of this commit, else runs `make image chart
# krew`. The tests themselves run on the machine's Go. 30 minutes: a first
# build with a new RELEASE_GO_TOOLCHAIN compiles everything cold (about 9
# minutes for the Linux binaries, 8 for the darwin ones, on 2 shared cores).
test-release: $(BIN)/helm
	cd hack/tools/release && SNAPKEEPER_ROOT=$(CURDIR) SNAPKEEPER_IMAGE_REPOSITORY=$(IMAGE_REPOSITORY) \
	  SNAPKEEPER_KREW_URI_BASE=$(KREW_URI_BASE) SNAPKEEPER_GO_TOOLCHAIN=$(RELEASE_GO_TOOLCHAIN) \
	  $(GO) test -count=1 -timeout 30m ./...

lint: lint-release
lint-release: $(BIN)/staticcheck
	cd hack/tools/release && $(GO) vet ./... && $(ABS_BIN)/staticcheck ./...

# Reproducibility: two copies of the working tree (tracked and untracked
# files and .git, so a tree others keep editing cannot change between the
# builds) at different paths, the second with an empty Go build cache, each
# builds the Linux binaries and the image; the digests must be equal.
check-reproducible: $(RELEASE_TOOL)
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && mkdir $$tmp/a && \
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C $$tmp/a && \
	cp -a .git $$tmp/a/ && cp -a $$tmp/a $$tmp/b && \
	for d in a b; do \
	  if [ $$d = b ]; then export GOCACHE=$$tmp/gocache; fi; \
	  start=$$(date +%s); \
	  $(MAKE) -C $$tmp/$$d --no-print-directory release-linux image RELEASE_TOOL=$(ABS_BIN)/snapkeeper-release \
	    VERSION=$(VERSION) REVISION=$(REVISION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) RELEASE_GO_TOOLCHAIN=$(RELEASE_GO_TOOLCHAIN) >$$tmp/$$d.log 2>&1 || { cat $$tmp/$$d.log; exit 1; }; \
	  echo "build $$d ($$tmp/$$d$${GOCACHE:+, empty GOCACHE}): $$(( $$(date +%s) - start ))s"; \
	done && \
	cat $$tmp/a/bin/release/oci/snapkeeper.digests && \
	diff $$tmp/a/bin/release/oci/snapkeeper.digests $$tmp/b/bin/release/oci/snapkeeper.digests && \
	echo "reproducible: both builds $$(cut -d' ' -f1 $$tmp/a/bin/release/oci/snapkeeper.digests | head -1)"

# crane, to push the layout to a registry (docs/releases.md).
$(BIN)/crane: hack/tools/release/go.mod hack/tools/release/go.sum
	cd hack/tools/release && $(GO) build -o $(ABS_BIN)/crane github.com/google/go-containerregistry/cmd/crane
