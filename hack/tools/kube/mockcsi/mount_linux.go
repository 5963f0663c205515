package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// bindMount mounts directory src onto target, read-only if asked.
func bindMount(src, target string, readonly bool) error {
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on %s: %w", src, target, err)
	}
	if !readonly {
		return nil
	}
	// A bind mount ignores MS_RDONLY: it takes effect only through a
	// remount of the bind (mount(8): "mount -o remount,bind,ro").
	if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		err = fmt.Errorf("remounting %s read-only: %w", target, err)
		if uerr := unmount(target); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	return nil
}

// unmount unmounts target; a target that is not mounted (EINVAL) or does
// not exist is fine.
func unmount(target string) error {
	err := syscall.Unmount(target, 0)
	if err == nil || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmounting %s: %w", target, err)
}

// isMountPoint reports whether path is a mount point in this process's
// mount namespace. It reads /proc/self/mountinfo: comparing the device of
// path and its parent (the usual shortcut) misses bind mounts within one
// filesystem, which is all this driver makes.
func isMountPoint(path string) (bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	canonical, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	return slices.Contains(parseMountPoints(string(data)), canonical), nil
}

// parseMountPoints returns the mount points (the fifth field) of
// /proc/<pid>/mountinfo lines (proc(5)).
func parseMountPoints(mountinfo string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeOctal(fields[4]))
	}
	return out
}

// unescapeOctal undoes the kernel's escapes in mountinfo paths: a space is
// written \040, a tab \011, a newline \012, a backslash \134.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
