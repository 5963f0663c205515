// Command fakes3 serves an S3-compatible object store on a loopback address
// (gofakes3, in memory: a test's backups are small and live as long as the
// test), the backup location of the backup suite:
//
//	fakes3 -listen 127.0.0.1:0 -bucket NAME [-addr-file FILE]
//
// It creates the bucket, writes the address it listens on to -addr-file
// once it serves, and stops on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve S3 on")
	bucket := flag.String("bucket", "velero", "bucket to create")
	addrFile := flag.String("addr-file", "", "file to write the served address to")
	flag.Parse()
	if err := run(*listen, *bucket, *addrFile); err != nil {
		fmt.Fprintln(os.Stderr, "fakes3:", err)
		os.Exit(1)
	}
}

func run(listen, bucket, addrFile string) error {
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil && !gofakes3.IsAlreadyExists(err) {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.StdLog(log.New(os.Stderr, "", log.LstdFlags), gofakes3.LogErr, gofakes3.LogWarn)))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: faker.Server()}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if addrFile != "" {
		if err := os.WriteFile(addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			return err
		}
	}
	log.Printf("serving S3 on %s, bucket %s", ln.Addr(), bucket)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
