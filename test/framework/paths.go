package framework

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
)

// RepoRoot is the directory holding the product's go.mod.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/snapkeeper/snapkeeper\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("framework: go.mod of github.com/snapkeeper/snapkeeper not found above the working directory")
		}
		dir = parent
	}
}

// KubeAPIServerEnv names an environment variable that, when set, is the path
// (absolute, or relative to the repository root) of the kube-apiserver the
// control plane runs instead of bin/kube-apiserver: `make test-k8s-floor`
// points it at the oldest supported release (docs/kubernetes-versions.md).
const KubeAPIServerEnv = "SNAPKEEPER_KUBE_APISERVER"

// Tool returns the path of a third-party binary built by `make tools` into bin/
// (for kube-apiserver, $SNAPKEEPER_KUBE_APISERVER when set; for the
// community's snapshot-controller and csi-snapshotter, those of the release
// $SNAPKEEPER_COMMUNITY selects: communityversion.go).
func Tool(name string) (string, error) {
	file, err := communityBinary(name)
	if err != nil {
		return "", err
	}
	build := "`make tools`"
	if isCommunityBinary(name) {
		build = "`make bin/" + file + "`"
	}
	name = file
	if p := os.Getenv(KubeAPIServerEnv); name == "kube-apiserver" && p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(RepoRoot(), p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", KubeAPIServerEnv, p, err)
		}
		return p, nil
	}
	p := filepath.Join(RepoRoot(), "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is missing: run %s first (%w)", p, build, err)
	}
	return p, nil
}

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{}
)

// OwnBinariesEnv names a directory of our commands that `make e2e` built
// from this tree just before `go test` (one `go build` for all of them,
// named as the package's last element): test processes use them instead of
// each linking its own copies. Unset (a plain `go test`), every process
// builds its own.
const OwnBinariesEnv = "SNAPKEEPER_OWN_BINARIES"

// OwnBinary builds one of our commands (for example "./cmd/webhook") once
// per test process and returns its path, or returns the one in
// $SNAPKEEPER_OWN_BINARIES. Building here, rather than trusting bin/, means
// a test never runs a stale binary.
func OwnBinary(pkg string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p, nil
	}
	if dir := os.Getenv(OwnBinariesEnv); dir != "" {
		p := filepath.Join(dir, filepath.Base(pkg))
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (run `make e2e`, or unset it to build here)", OwnBinariesEnv, dir, err)
		}
		built[pkg] = p
		return p, nil
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "snapkeeper-bin-")
		if err != nil {
			return "", err
		}
		buildDir = d
	}
	out := filepath.Join(buildDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out, nil
}

func removeBuildDir() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// serverTool returns the path of Tool name, a server, and a free port for
// it to serve on.
func serverTool(name string) (bin string, port int, err error) {
	if bin, err = Tool(name); err != nil {
		return "", 0, err
	}
	port, err = FreePort()
	return bin, port, err
}

// FreePort returns a free TCP port on 127.0.0.1 for another process to
// listen on. It is drawn below the kernel's ephemeral range (and below the
// NodePort range, 30000-32767): a port the kernel hands out for ":0" is also
// what it gives the next outgoing connection, and with the API servers,
// etcd and the controllers of parallel test packages connecting all the
// time one of them took such a port before the process it was meant for
// bound it ("bind: address already in use", a CI run of the conformance
// test). No port is handed out twice by one test process.
func FreePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 200 {
		p := portLow + rand.IntN(portHigh-portLow)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use
		}
		l.Close()
		portsGiven[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 200 tries", portLow, portHigh)
}

// The range FreePort draws from: below 30000 (NodePorts, then the
// ephemeral range from 32768 on Linux by default).
const portLow, portHigh = 20000, 30000

var (
	portMu     sync.Mutex
	portsGiven = map[int]bool{}
)

// FreeAddr returns "127.0.0.1:<free port>".
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
