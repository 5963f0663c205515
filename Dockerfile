# syntax=docker/dockerfile:1
# snapkeeper image: snapkeeper-controller (the entrypoint: binder and CSI
# side), snapkeeper-webhook and snapctl (the chart's `helm test` runs
# `snapctl selftest webhook`), static binaries on a distroless base.
#
# The image's default user is root (UID 0), as the community csi-snapshotter
# and snapshot-controller images run: a driver chart that swaps the sidecar
# image keeps its pod spec, and drivers create their socket owned by root
# with mode 0755, which a non-root process cannot connect to. Our own chart
# runs both Deployments as UID/GID 65532 (runAsNonRoot) through their
# securityContext; see docs/controller.md, "Image user and the driver socket".
#
#   docker build --build-arg VERSION=$(make -s version) -t snapkeeper .
#
# Releases do not use this file: `make image` assembles the same layout
# (the three binaries, root by default, entrypoint snapkeeper-controller) on an
# empty base without a container daemon, reproducibly (docs/releases.md).
#
# A CSI driver chart may swap its csi-snapshotter sidecar image for this one
# and keep its arguments: with --csi-address, another csi-snapshotter-only
# flag, or the sidecar's default socket volume at /run/csi, the controller
# runs the CSI side (see docs/controller.md). This image has no /run/csi of
# its own.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    set -eu; \
    ldflags="-s -w -X github.com/snapkeeper/snapkeeper/pkg/version.Version=${VERSION}"; \
    for cmd in controller webhook snapctl; do \
      out=snapkeeper-$cmd; [ $cmd = snapctl ] && out=snapctl; \
      GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "$ldflags" \
        -o /out/$out ./cmd/$cmd; \
    done

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="snapkeeper" \
      org.opencontainers.image.description="CSI volume snapshot control plane" \
      org.opencontainers.image.source="https://github.com/snapkeeper/snapkeeper" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/snapkeeper-controller /out/snapkeeper-webhook /out/snapctl /usr/local/bin/
# Root by default for the sidecar image swap (see the top of this file); the
# chart sets runAsUser 65532 where no driver socket is involved.
USER 0:0
ENTRYPOINT ["/usr/local/bin/snapkeeper-controller"]
