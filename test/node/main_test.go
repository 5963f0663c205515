// Package node installs snapkeeper as users do, on a real node
// (test/framework/node.go): `helm install` of the chart with our image
// imported into containerd, its pods scheduled, probed and Ready under Pod
// Security "restricted", the webhook reached by kube-apiserver through its
// Service. It changes the host and needs root: `make test-node` runs it
// (SNAPKEEPER_NODE=1); elsewhere every test skips with the command to run.
package node

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

var (
	env  *framework.Env
	node *framework.Node
)

func TestMain(m *testing.M) {
	if os.Getenv(framework.NodeEnv) == "" {
		fmt.Println("test/node: skipped: it starts a real node on this host as root; run `make test-node`")
		os.Exit(0)
	}
	if why := framework.NodeMissing(); why != "" {
		fmt.Fprintln(os.Stderr, "test/node:", why)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	start := time.Now()
	var err error
	env, node, err = framework.StartNodeEnv(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/node: start the node:", err)
		os.Exit(1)
	}
	fmt.Printf("test/node: node %s Ready at %s, %v after start\n", framework.NodeName, node.IP, time.Since(start).Round(time.Millisecond))
	code := m.Run()
	node.Stop()
	if code == 0 && os.Getenv("SNAPKEEPER_KEEP_TMP") == "" {
		os.RemoveAll(env.Dir)
	} else {
		fmt.Fprintf(os.Stderr, "test/node: logs kept in %s\n", env.Dir)
	}
	os.Exit(code)
}
