package logging

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestComponentBaseFlagsAreAccepted(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	AddFlags(fs)
	err := fs.Parse([]string{"-v=3", "--vmodule=foo=4", "--log-flush-frequency=2s",
		"--log-text-split-stream", "--log-text-info-buffer-size=64Ki",
		"--log-json-split-stream=true", "--log-json-info-buffer-size=1Mi"})
	if err != nil {
		t.Fatal(err)
	}
	if Flags.FlushFrequency.String() != "2s" || !Flags.Text.SplitStream || !Flags.JSON.SplitStream ||
		Flags.Text.InfoBufferSize.Value() != 64<<10 || Flags.JSON.InfoBufferSize.Value() != 1<<20 {
		t.Errorf("flags = %+v", Flags)
	}
	if err := fs.Parse([]string{"--log-json-info-buffer-size=lots"}); err == nil {
		t.Error("a buffer size that is no quantity was accepted")
	}
}

// With split streams, errors go to stderr and the rest to stdout (after a
// flush when buffered), in both formats.
func TestSplitStreams(t *testing.T) {
	defer klog.ClearLogger()
	for _, format := range []string{"text", "json"} {
		for _, buffer := range []string{"0", "64Ki"} {
			t.Run(format+" buffer "+buffer, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				stream := StreamOptions{SplitStream: true}
				if err := stream.InfoBufferSize.Set(buffer); err != nil {
					t.Fatal(err)
				}
				ctx := setup(context.Background(), format, Config{Text: stream, JSON: stream}, &stdout, &stderr)
				logger := klog.FromContext(ctx)
				logger.Info("hello info")
				logger.Error(errors.New("boom"), "hello error")
				klog.Flush()
				if !strings.Contains(stdout.String(), "hello info") || strings.Contains(stdout.String(), "hello error") {
					t.Errorf("stdout = %q", stdout.String())
				}
				if !strings.Contains(stderr.String(), "hello error") || strings.Contains(stderr.String(), "hello info") {
					t.Errorf("stderr = %q", stderr.String())
				}
				if format == "json" && !strings.HasPrefix(stdout.String(), "{") {
					t.Errorf("not JSON: %q", stdout.String())
				}
			})
		}
	}
}

func TestLoggingFormat(t *testing.T) {
	for args, want := range map[string]string{"": "", "--logging-format=json": "", "--logging-format=text": "", "--logging-format=xml": `--logging-format "xml": want "text" or "json"`} {
		o := NewOptions()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.AddFlags(fs)
		var list []string
		if args != "" {
			list = []string{args}
		}
		if err := fs.Parse(list); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", args, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("%q: error %v, want %q", args, err, want)
		}
		if args == "" && o.Format != FormatText {
			t.Errorf("default format %q", o.Format)
		}
	}
}
