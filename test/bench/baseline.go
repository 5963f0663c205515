package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/snapkeeper/snapkeeper/test/framework"
)

// The baseline: our controller as built from an earlier commit (-baseline),
// run as one more system ("ours-baseline") so that a change is measured
// against the tree before it in the same run, interleaved with it.

const sysOursBaseline = "ours-baseline"

// baselineRev is -baseline: a git revision, or "" for no baseline system.
var baselineRev string

var baselineBuild struct {
	once sync.Once
	bin  string
	err  error
	dir  string // the worktree, removed at exit
}

// baselineBinary builds ./cmd/controller at baselineRev in a temporary git
// worktree (once per process).
func baselineBinary() (string, error) {
	b := &baselineBuild
	b.once.Do(func() {
		root := framework.RepoRoot()
		dir, err := os.MkdirTemp("", "snapkeeper-baseline-")
		if err != nil {
			b.err = err
			return
		}
		b.dir = dir
		wt := filepath.Join(dir, "tree")
		if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", wt, baselineRev).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("git worktree add %s: %w\n%s", baselineRev, err, out)
			return
		}
		bin := filepath.Join(dir, "controller")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/controller")
		cmd.Dir = wt
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/controller at %s: %w\n%s", baselineRev, err, out)
			return
		}
		b.bin = bin
	})
	return b.bin, b.err
}

// removeBaseline removes the baseline's worktree and binary.
func removeBaseline() {
	if baselineBuild.dir == "" {
		return
	}
	_ = exec.Command("git", "-C", framework.RepoRoot(), "worktree", "remove", "--force", filepath.Join(baselineBuild.dir, "tree")).Run()
	os.RemoveAll(baselineBuild.dir)
}

// baselineSystem is our pair as built at baselineRev, with oursArgs.
func baselineSystem(oursArgs []string) *system {
	rev := baselineRev
	if out, err := exec.Command("git", "-C", framework.RepoRoot(), "rev-parse", "--short", baselineRev).Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	s := &system{ID: sysOursBaseline, Label: "snapkeeper at " + rev + " (baseline)", perSnapshotBudget: 50 * time.Millisecond,
		Flags: "as snapkeeper above, built from commit `" + rev + "`"}
	s.start = func(env *framework.Env, dir, sock string, o startOpts) (*running, error) {
		bin, err := baselineBinary()
		if err != nil {
			return nil, err
		}
		o.extra = append(append([]string(nil), oursArgs...), o.extra...)
		return startOurBinary(env, dir, sock, bin, o)
	}
	return s
}
