// Command snapkeeper-controller runs the snapshot binder, the CSI side of a
// driver, or both (see --components): options.go holds its flags, run.go
// the wiring of the components.
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
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	o.AddFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag
	if o.ShowVersion {
		fmt.Println(version.String())
		return
	}
	o.Complete(fs, os.Getenv)
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "invalid options:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logging.Setup(ctx, o.Logging.Format)
	memlimit.Apply(ctx, memlimit.OS)
	defer logging.Flush()
	if err := run(ctx, o); err != nil {
		logging.Fatal(ctx, err)
	}
}
