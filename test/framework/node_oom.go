package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// OOMKill has the kernel kill a running container of this node for
// exceeding its memory limit, as when its memory grows past
// resources.limits.memory: the container's processes are made the OOM
// killer's first choice (oom_score_adj 1000, a raise any owner may make)
// and a process of ours joins the container's memory cgroup and allocates
// more than the limit. The kernel then kills the container's process, the
// runtime reports OOMKilled and the kubelet restarts the container as it
// would after a real one. containerID is the pod status's
// ("containerd://<id>"). It returns the limit in bytes.
func (n *Node) OOMKill(ctx context.Context, containerID string) (int64, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/memory/kubepods/*/pod*/" + id, "/sys/fs/cgroup/memory/kubepods/pod*/" + id} {
		dirs = append(dirs, globs(pattern)...)
	}
	if len(dirs) != 1 {
		return 0, fmt.Errorf("the memory cgroup of container %s: found %v", id, dirs)
	}
	dir := dirs[0]
	limit, err := readInt(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil {
		return 0, err
	}
	if limit >= 1<<62 {
		return 0, fmt.Errorf("container %s has no memory limit", id)
	}
	kills, err := oomKills(dir)
	if err != nil {
		return 0, err
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, err
	}
	for _, pid := range strings.Fields(string(procs)) {
		if err := os.WriteFile(filepath.Join("/proc", pid, "oom_score_adj"), []byte("1000"), 0); err != nil {
			return 0, fmt.Errorf("raise the OOM score of process %s of container %s: %w", pid, id, err)
		}
	}
	// dd's buffer is larger than the limit: once the container's process
	// is gone, dd is killed too, so it never outlives the container.
	hog := exec.CommandContext(ctx, "sh", "-c", `echo $$ >"$1/cgroup.procs" && exec dd if=/dev/zero of=/dev/null bs="$2" count=1 2>/dev/null`,
		"oom", dir, strconv.FormatInt(limit+64<<20, 10))
	_ = hog.Run() // killed by the OOM killer: exit status 137
	after, err := oomKills(dir)
	if err != nil && !os.IsNotExist(err) {
		return 0, err
	}
	if err == nil && after == kills {
		return 0, fmt.Errorf("no OOM kill in container %s's memory cgroup (limit %d bytes)", id, limit)
	}
	return limit, nil
}

// oomKills is a memory cgroup's count of OOM kills.
func oomKills(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s/memory.oom_control has no oom_kill count", dir)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
