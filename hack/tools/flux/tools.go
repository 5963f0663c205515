//go:build tools

// Package tools pins Flux's two controllers; the Makefile builds their
// main packages from this module (make test-gitops).
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
