// Command pause is the node plane's sandbox (pause) image: it holds a pod's
// namespaces and does nothing else until it is told to stop
// (test/framework/node.go; containerd's sandbox_image). As PID 1 of the
// pod it also reaps the orphans a shared process namespace hands it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
