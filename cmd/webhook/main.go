// Command snapkeeper-webhook is the validating admission webhook for
// snapshot objects and for claims restoring from them (docs/webhook.md):
// options.go holds its flags, run.go the wiring.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/snapkeeper/snapkeeper/pkg/logging"
	"github.com/snapkeeper/snapkeeper/pkg/memlimit"
	"github.com/snapkeeper/snapkeeper/pkg/version"
)

func main() {
	o := NewOptions()
	fs := flag.NewFlagSet("snapkeeper-webhook", flag.ExitOnError)
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag
	if o.ShowVersion {
		fmt.Println("snapkeeper-webhook", version.String())
		return
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "snapkeeper-webhook: invalid options:\n%v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logging.Setup(ctx, o.Logging.Format)
	memlimit.Apply(ctx, memlimit.OS)
	if err := run(ctx, o); err != nil {
		stop()
		logging.Fatal(ctx, err)
	}
}
