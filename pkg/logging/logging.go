// Package logging sets up klog for our binaries: text (klog's own) or JSON
// (through log/slog), with -v verbosity either way.
package logging

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// AddFlags registers klog's flags (-v, -vmodule, ...) on fs.
func AddFlags(fs *flag.FlagSet) {
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	kfs.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
}

// Setup installs the logger for format ("text" or "json") and returns ctx
// carrying it.
func Setup(ctx context.Context, format string) context.Context {
	if format == "json" {
		level := slog.Level(-verbosity())
		h := slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
		klog.SetSlogLogger(slog.New(h))
		return klog.NewContext(ctx, logr.FromSlogHandler(h))
	}
	return klog.NewContext(ctx, klog.Background())
}

// verbosity is the -v level in effect.
func verbosity() int {
	for v := 10; v > 0; v-- {
		if klog.V(klog.Level(v)).Enabled() {
			return v
		}
	}
	return 0
}

// Fatal logs err and exits 1.
func Fatal(ctx context.Context, err error) {
	klog.FromContext(ctx).Error(err, "Exiting")
	klog.Flush()
	os.Exit(1)
}
