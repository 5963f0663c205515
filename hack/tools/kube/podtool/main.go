// Command podtool is the workload image of the node suites
// (test/node): no registry is reachable, so instead of busybox a pod runs
// this static binary.
//
//	podtool write FILE TEXT   writes TEXT to FILE (synced), then serves
//	podtool serve             waits for SIGTERM
//	podtool cat FILE          prints FILE (kubectl exec)
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "podtool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: podtool write FILE TEXT | serve | cat FILE")
	}
	switch {
	case args[0] == "write" && len(args) == 3:
		if err := writeSynced(args[1], args[2]); err != nil {
			return err
		}
		fmt.Printf("wrote %d bytes to %s\n", len(args[2]), args[1])
		return serve()
	case args[0] == "serve":
		return serve()
	case args[0] == "cat" && len(args) == 2:
		b, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	return fmt.Errorf("unknown command %q", args)
}

// writeSynced writes text to path and syncs it, so that a snapshot taken
// right after sees it.
func writeSynced(path, text string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func serve() error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}
