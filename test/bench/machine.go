package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

func describeMachine() [][2]string {
	model, cores := "", 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				model = strings.TrimSpace(v)
			case "processor":
				cores++
			}
		}
	}
	mem := ""
	if kb := memTotalkB(); kb > 0 {
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return [][2]string{
		{"CPU", fmt.Sprintf("%d × %s (nproc %d)", cores, model, runtime.NumCPU())},
		{"memory", mem},
		{"kernel", strings.TrimSpace(string(kernel))},
		{"Go", runtime.Version()},
		{"note", "the machine is shared with other engineers' builds and tests; times vary from run to run"},
	}
}

// memTotalkB is the machine's memory (MemTotal), 0 when unknown.
func memTotalkB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	return 0
}

// treeState is the commit the benchmark measured and whether the working
// tree differed from it.
type treeState struct {
	commit string
	dirty  string // "" when clean, else a summary of the changed/untracked files
}

func describeTree() (treeState, error) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return treeState{}, fmt.Errorf("bench: git rev-parse HEAD: %v (run inside the repository)", err)
	}
	t := treeState{commit: strings.TrimSpace(string(out))}
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		return t, fmt.Errorf("bench: git status: %v", err)
	}
	var modified, untracked int
	for _, line := range strings.Split(strings.TrimRight(string(st), "\n"), "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "??"):
			untracked++
		default:
			modified++
		}
	}
	if modified+untracked > 0 {
		t.dirty = fmt.Sprintf("%d modified, %d untracked files", modified, untracked)
	}
	return t, nil
}
