// Package node installs snapkeeper as users do, on a real node
// (test/framework/node.go): `helm install` of the chart with our image
// imported into containerd, its pods scheduled, probed and Ready under Pod
// Security "restricted", the webhook reached by kube-apiserver through its
// Service. It changes the host and needs root: `make test-node` runs it
// (SNAPKEEPER_NODE=1), `make test` its short form (TestNodeShort,
// SNAPKEEPER_NODE=if-possible: where root or the node's packages are
// missing it says so in one line and passes); elsewhere every test skips
// with the command to run. After the tests the node is torn down and the
// host checked: anything the node left there fails the run.
package node

import (
	"context"
	"fmt"
	"os"
	"strings"
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
		if os.Getenv(framework.NodeEnv) == "if-possible" {
			fmt.Println("test/node: skipped:", why)
			os.Exit(0)
		}
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
	start = time.Now()
	node.Stop()
	if left := node.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "test/node: the node left on the host:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	} else {
		fmt.Printf("test/node: node torn down in %v; the host holds nothing of it\n", time.Since(start).Round(time.Millisecond))
	}
	if code == 0 && os.Getenv("SNAPKEEPER_KEEP_TMP") == "" {
		os.RemoveAll(env.Dir)
	} else {
		fmt.Fprintf(os.Stderr, "test/node: logs kept in %s\n", env.Dir)
	}
	os.Exit(code)
}
