// Package logging sets up klog for our binaries: text (klog's own) or JSON
// (through log/slog), with -v verbosity either way.
//
// Besides klog's flags it registers the logging flags that the Kubernetes
// component-base adds to the community snapshot-controller and
// csi-snapshotter (--log-flush-frequency and the split-stream options of
// both formats), with the same meaning, so their command lines start us
// unchanged. Options adds --logging-format, which each binary keeps in its
// own options.
package logging

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// Config is the state of the logging flags.
type Config struct {
	// FlushFrequency is the longest time between two flushes of buffered
	// log output (--log-flush-frequency).
	FlushFrequency time.Duration
	// Text and JSON are the stream options of each format.
	Text, JSON StreamOptions
}

// StreamOptions are the --log-<format>-split-stream and
// --log-<format>-info-buffer-size flags of one format.
type StreamOptions struct {
	// SplitStream writes error messages to stderr and the others to stdout;
	// without it everything goes to stderr.
	SplitStream bool
	// InfoBufferSize buffers up to this many bytes of the stdout stream
	// when SplitStream is set (0: unbuffered). Buffered lines are flushed
	// every FlushFrequency and before exit.
	InfoBufferSize resource.QuantityValue
}

// Flags is the configuration the flags registered by AddFlags fill in.
var Flags = Config{FlushFrequency: 5 * time.Second}

// vmodule is klog's -vmodule flag, for loggers other than klog's own.
var vmodule flag.Value

// AddFlags registers klog's flags (-v, -vmodule, ...) and the logging
// flags of the Kubernetes component-base on fs.
func AddFlags(fs *flag.FlagSet) {
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	vmodule = kfs.Lookup("vmodule").Value
	kfs.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	fs.DurationVar(&Flags.FlushFrequency, "log-flush-frequency", Flags.FlushFrequency, "Maximum time between log flushes.")
	for _, f := range []struct {
		name string
		o    *StreamOptions
	}{{"text", &Flags.Text}, {"json", &Flags.JSON}} {
		fs.BoolVar(&f.o.SplitStream, "log-"+f.name+"-split-stream", false,
			"In "+f.name+" format, write error messages to stderr and info messages to stdout. The default is a single stream on stderr.")
		fs.Var(&f.o.InfoBufferSize, "log-"+f.name+"-info-buffer-size",
			"In "+f.name+" format with split output streams, buffer this many bytes of info messages (a quantity such as 64Ki; 0 disables the buffer).")
	}
}

// Log formats of --logging-format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Options are the logging options of one binary: its --logging-format,
// plus the process-wide flags of AddFlags.
type Options struct {
	// Format is "text" (klog's own) or "json".
	Format string
}

// NewOptions returns the defaults: text logs.
func NewOptions() Options { return Options{Format: FormatText} }

// AddFlags registers --logging-format and the flags of the package-level
// AddFlags on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Format, "logging-format", o.Format, `Log format: "text" or "json".`)
	AddFlags(fs)
}

// Validate reports a format that is neither text nor json.
func (o *Options) Validate() error {
	if o.Format != FormatText && o.Format != FormatJSON {
		return fmt.Errorf("--logging-format %q: want \"text\" or \"json\"", o.Format)
	}
	return nil
}

// Setup installs the logger for format ("text" or "json") with the flags
// of AddFlags, and returns ctx carrying it.
func Setup(ctx context.Context, format string) context.Context {
	return setup(ctx, format, Flags, os.Stdout, os.Stderr)
}

func setup(ctx context.Context, format string, cfg Config, stdout, stderr io.Writer) context.Context {
	stream := cfg.Text
	if format == FormatJSON {
		stream = cfg.JSON
	}
	var info *infoWriter
	if stream.SplitStream {
		info = newInfoWriter(stdout, stream.InfoBufferSize.Value())
	}
	if cfg.FlushFrequency > 0 {
		klog.StartFlushDaemon(cfg.FlushFrequency)
	}
	var logger logr.Logger
	switch {
	case format == FormatJSON:
		opts := &slog.HandlerOptions{Level: slog.Level(-verbosity())}
		var h slog.Handler = slog.NewJSONHandler(stderr, opts)
		if info != nil {
			h = &splitHandler{info: slog.NewJSONHandler(info, opts), errors: h, flush: info.Flush}
		}
		logger = logr.FromSlogHandler(h)
	case info != nil:
		c := textlogger.NewConfig(textlogger.Verbosity(verbosity()),
			textlogger.Output(&severityWriter{info: info, errors: stderr}))
		if vmodule != nil && vmodule.String() != "" {
			_ = c.VModule().Set(vmodule.String())
		}
		logger = textlogger.NewLogger(c)
	default:
		// klog's own text output on stderr, as without these flags.
		return klog.NewContext(ctx, klog.Background())
	}
	flush := func() {}
	if info != nil {
		flush = info.Flush
	}
	klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true), klog.FlushLogger(flush))
	return klog.NewContext(ctx, logger)
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

// Flush writes out buffered log output.
func Flush() { klog.Flush() }

// Fatal logs err, flushes and exits 1.
func Fatal(ctx context.Context, err error) {
	klog.FromContext(ctx).Error(err, "Exiting")
	klog.Flush()
	os.Exit(1)
}

// infoWriter is the stdout stream of split output, optionally buffered.
type infoWriter struct {
	mu  sync.Mutex
	out io.Writer
	buf *bufio.Writer
}

func newInfoWriter(out io.Writer, size int64) *infoWriter {
	w := &infoWriter{out: out}
	if size > 0 {
		w.buf = bufio.NewWriterSize(out, int(min(size, 1<<30)))
	}
	return w
}

func (w *infoWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf != nil {
		return w.buf.Write(p)
	}
	return w.out.Write(p)
}

// Flush writes out what is buffered.
func (w *infoWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf != nil {
		_ = w.buf.Flush()
	}
}

// severityWriter routes klog text entries by the severity letter that
// starts each of them (one Write per entry): errors and fatal messages to
// errors, the rest to info.
type severityWriter struct {
	info   *infoWriter
	errors io.Writer
}

func (w *severityWriter) Write(p []byte) (int, error) {
	if len(p) > 0 && (p[0] == 'E' || p[0] == 'F') {
		w.info.Flush() // keep the order of the two streams
		return w.errors.Write(p)
	}
	return w.info.Write(p)
}

// splitHandler sends error records to one handler and the others to
// another; flush writes out the info stream before an error, to keep the
// order of the two streams.
type splitHandler struct {
	info, errors slog.Handler
	flush        func()
}

func (h *splitHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.info.Enabled(ctx, l)
}

func (h *splitHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.flush()
		return h.errors.Handle(ctx, r)
	}
	return h.info.Handle(ctx, r)
}

func (h *splitHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &splitHandler{info: h.info.WithAttrs(as), errors: h.errors.WithAttrs(as), flush: h.flush}
}

func (h *splitHandler) WithGroup(name string) slog.Handler {
	return &splitHandler{info: h.info.WithGroup(name), errors: h.errors.WithGroup(name), flush: h.flush}
}
