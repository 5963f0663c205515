//go:build !linux

package main

import "errors"

// Publishing with --data-dir bind-mounts, which this driver does on Linux
// only; everything else about it (controller calls, tests of copies) works
// anywhere.
var errNoBindMounts = errors.New("bind mounts (NodePublishVolume with --data-dir) need Linux")

func bindMount(src, target string, readonly bool) error { return errNoBindMounts }

func unmount(target string) error { return errNoBindMounts }

func isMountPoint(path string) (bool, error) { return false, errNoBindMounts }
