// Package memlimit sets the Go runtime's soft memory limit below the
// container's memory limit, so that the garbage collector works harder
// before the kernel's OOM killer would end the process (a webhook flooded
// with connections, a controller listing a large cluster).
//
// The limit comes from, in order: GOMEMLIMIT (the runtime's own setting,
// left alone), SNAPKEEPER_MEMORY_LIMIT (bytes, or a quantity such as
// 256Mi; the chart sets it from the container's limits.memory through the
// downward API), then the cgroup's memory.max (v2) or
// memory.limit_in_bytes (v1).
package memlimit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// EnvVar names the container's memory limit in the environment.
const EnvVar = "SNAPKEEPER_MEMORY_LIMIT"

// Ratio is the share of the container's limit the Go runtime aims to stay
// under; the rest covers what the runtime does not count (memory not yet
// returned to the kernel, the binary's pages) and growth between two
// collections.
const Ratio = 0.8

// cgroup files holding the limit, v2 first.
var cgroupFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// unlimitedV1 is at or above what cgroup v1 reports for "no limit"
// (a page-aligned maximum int64).
const unlimitedV1 = int64(1) << 62

// Env is what Limit reads: the environment and files.
type Env struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
}

// OS reads the process's environment and the host's files.
var OS = Env{Getenv: os.Getenv, ReadFile: os.ReadFile}

// Limit returns the container's memory limit in bytes and where it was
// found; 0 when there is none.
func (e Env) Limit() (int64, string, error) {
	if v := strings.TrimSpace(e.Getenv(EnvVar)); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return 0, "", fmt.Errorf("%s=%q is not a memory quantity (bytes, or e.g. 256Mi): %w", EnvVar, v, err)
		}
		if q.Sign() <= 0 {
			return 0, "", fmt.Errorf("%s=%q: the limit must be positive", EnvVar, v)
		}
		return q.Value(), EnvVar, nil
	}
	for _, f := range cgroupFiles {
		b, err := e.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("reading %s: %w", f, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, f, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("%s holds %q, not a number of bytes: %w", f, s, err)
		}
		if n <= 0 || n >= unlimitedV1 {
			return 0, f, nil
		}
		return n, f, nil
	}
	return 0, "", nil
}

// Apply sets the runtime's soft memory limit to Ratio of the container's
// limit, unless GOMEMLIMIT is set or no limit is found, and logs what it
// did. A limit it cannot read is logged and left alone: the process runs as
// it would without this package.
func Apply(ctx context.Context, e Env) {
	log := klog.FromContext(ctx)
	if v := e.Getenv("GOMEMLIMIT"); v != "" {
		log.V(2).Info("Go memory limit set by GOMEMLIMIT", "GOMEMLIMIT", v)
		return
	}
	limit, source, err := e.Limit()
	if err != nil {
		log.Error(err, "Container memory limit not read; the Go runtime runs without a soft memory limit")
		return
	}
	if limit == 0 {
		log.V(2).Info("No container memory limit found; the Go runtime runs without a soft memory limit", "source", source)
		return
	}
	soft := Soft(limit)
	debug.SetMemoryLimit(soft)
	log.Info("Go soft memory limit set below the container's", "containerLimitBytes", limit, "source", source, "softLimitBytes", soft)
}

// Soft is the runtime limit for a container limit of limit bytes (Ratio
// below 1, so it always fits an int64).
func Soft(limit int64) int64 { return int64(float64(limit) * Ratio) }
