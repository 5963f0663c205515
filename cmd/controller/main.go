// Command snapkeeper-controller runs the snapshot binder, the CSI side of a
// driver, or both (see --components).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/snapkeeper/snapkeeper/pkg/controller"
	"github.com/snapkeeper/snapkeeper/pkg/logging"
	"github.com/snapkeeper/snapkeeper/pkg/version"
)

func main() {
	o := controller.NewOptions()
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	o.AddFlags(fs)
	logging.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if o.ShowVersion {
		fmt.Println(version.Version)
		return
	}
	o.Complete(fs, os.Getenv)
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "invalid options:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logging.Setup(ctx, o.LoggingFormat)
	defer logging.Flush()
	if err := controller.Run(ctx, o); err != nil {
		logging.Fatal(ctx, err)
	}
}
