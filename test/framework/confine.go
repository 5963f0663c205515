package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// confinement is what a container's securityContext takes away from a
// process, rebuilt on this machine so that our binaries run under their
// Deployment's settings (PodProcess.Confine): a read-only root filesystem
// (a private mount namespace remounts / read-only; only the directories
// that stand in for the pod's writable volumes stay writable), the UID and
// GID, no capabilities, no privilege escalation, and no HOME with / as the
// working directory. A binary that writes anywhere else fails its test.
type confinement struct {
	readOnlyRoot bool
	uid, gid     *int64
	noNewPrivs   bool
	dropAll      bool
	writable     []string
}

// confinementOf reads the confinement from the pod's and the container's
// securityContext, as the kubelet merges them.
func confinementOf(pod corev1.PodSpec, c corev1.Container, writable []string) confinement {
	out := confinement{writable: writable}
	if psc := pod.SecurityContext; psc != nil {
		out.uid, out.gid = psc.RunAsUser, psc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			out.uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			out.gid = sc.RunAsGroup
		}
		out.readOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		out.noNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		out.dropAll = sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0
	}
	return out
}

// wrap returns the command that runs bin with args under c: unshare(1) for
// the mount namespace, setpriv(1) for the identity and capabilities. It
// needs root and both tools; without them the process runs unconfined and
// the test says so.
func (c confinement) wrap(t T, bin string, args []string, readable ...string) (cmd string, cmdArgs []string, confined bool) {
	t.Helper()
	_, errU := exec.LookPath("unshare")
	_, errS := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || errU != nil || errS != nil {
		t.Logf("not root or no unshare/setpriv: %s runs without its container's securityContext", filepath.Base(bin))
		return bin, args, false
	}
	priv := []string{"setpriv", "--pdeathsig", "SIGKILL"}
	if c.noNewPrivs {
		priv = append(priv, "--no-new-privs")
	}
	if c.dropAll {
		priv = append(priv, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all")
	}
	if c.uid != nil {
		gid := *c.uid
		if c.gid != nil {
			gid = *c.gid
		}
		priv = append(priv, "--reuid="+strconv.FormatInt(*c.uid, 10), "--regid="+strconv.FormatInt(gid, 10), "--clear-groups")
		shareWith(t, int(*c.uid), int(gid), append(readable, c.writable...)...)
	}
	// $0 is the binary, "$@" its arguments; the writable directories are
	// bind-mounted onto themselves first, so that remounting / read-only
	// leaves them writable, as a volume mount would be.
	script := "set -e\n"
	for _, w := range c.writable {
		script += fmt.Sprintf("mount --bind %q %q\n", w, w)
	}
	if c.readOnlyRoot {
		script += "mount -o remount,bind,ro /\n"
	}
	script += "cd /\nunset HOME\nexec"
	for _, p := range priv {
		script += " " + p
	}
	script += ` -- "$0" "$@"`
	return "unshare", append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, bin}, args...), true
}

// shareWith gives uid:gid the files a pod would get through its volumes
// (ownership of each path, recursively) and the right to walk to them
// (o+x on every parent directory, which lists nothing).
func shareWith(t T, uid, gid int, paths ...string) {
	t.Helper()
	for _, p := range paths {
		err := filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, uid, gid)
		})
		if err != nil {
			t.Fatalf("%v", err)
		}
		for dir := filepath.Dir(p); dir != "/"; dir = filepath.Dir(dir) {
			info, err := os.Stat(dir)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if info.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(dir, info.Mode().Perm()|0o001); err != nil {
					t.Fatalf("%v", err)
				}
			}
		}
	}
}

func (c confinement) String() string {
	uid := "the image's (root)"
	if c.uid != nil {
		uid = strconv.FormatInt(*c.uid, 10)
	}
	return fmt.Sprintf("uid %s, read-only root filesystem %v, no new privileges %v, all capabilities dropped %v, writable %v",
		uid, c.readOnlyRoot, c.noNewPrivs, c.dropAll, c.writable)
}

// verify reads the confinement back from /proc once the process has
// become bin (unshare, sh and setpriv exec into it under the same PID):
// its UID, no effective capability, no_new_privs, and / mounted read-only
// in its mount namespace.
func (c confinement) verify(t T, pid int, bin string) {
	t.Helper()
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatalf("%v", err)
	}
	Eventually(t, 30*time.Second, filepath.Base(bin)+" to start under its confinement", func() (bool, error) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return exe == want, fmt.Errorf("runs %s (%v)", exe, err)
	})
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("%v", err)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	if c.uid != nil && !strings.HasPrefix(fields["Uid"], strconv.FormatInt(*c.uid, 10)+" ") {
		t.Errorf("%s runs as uid %s, want %d", bin, fields["Uid"], *c.uid)
	}
	if c.dropAll && fields["CapEff"] != "0000000000000000" {
		t.Errorf("%s has capabilities %s", bin, fields["CapEff"])
	}
	if c.noNewPrivs && fields["NoNewPrivs"] != "1" {
		t.Errorf("%s may gain privileges (NoNewPrivs %s)", bin, fields["NoNewPrivs"])
	}
	if c.readOnlyRoot {
		mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
		if err != nil {
			t.Fatalf("%v", err)
		}
		rootRO := false
		for _, l := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(l); len(f) >= 4 && f[1] == "/" {
				rootRO = slices.Contains(strings.Split(f[3], ","), "ro")
			}
		}
		if !rootRO {
			t.Errorf("%s sees / writable", bin)
		}
	}
}
