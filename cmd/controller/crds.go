package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// waitForCRDs blocks until snapshot.storage.k8s.io/v1 is served, retrying
// with a backoff capped at intervalMax, and gives up after timeout. It
// reports whether groupsnapshot.storage.k8s.io/v1 is served too.
func waitForCRDs(ctx context.Context, dc discovery.DiscoveryInterface, intervalMax, timeout time.Duration) (groups bool, err error) {
	logger := klog.FromContext(ctx)
	deadline := time.Now().Add(timeout)
	delay := 100 * time.Millisecond
	for {
		_, err = dc.ServerResourcesForGroupVersion("snapshot.storage.k8s.io/v1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("the snapshot CRDs (snapshot.storage.k8s.io/v1) are not served after %s: install them (charts/snapkeeper/files/crds) and restart: %w", timeout, err)
		}
		logger.Info("Waiting for the snapshot CRDs", "err", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, intervalMax)
	}
	if _, gerr := dc.ServerResourcesForGroupVersion(groupVersion); gerr != nil {
		logger.V(2).Info("Group snapshot CRDs are not served", "err", gerr)
		return false, nil
	}
	return true, nil
}

// groupVersion is the API of volume group snapshots.
const groupVersion = "groupsnapshot.storage.k8s.io/v1"

// errGroupCRDsServed ends a process that started without the group CRDs
// once they are served: its informers and loops are wired at start-up, so
// the restart (by the kubelet, or the standby replica taking over) is what
// serves the groups.
var errGroupCRDsServed = errors.New("the volume group snapshot CRDs (" + groupVersion + ") are served now; exiting so that the restarted controller serves VolumeGroupSnapshots")

// watchGroupCRDs checks every interval whether the group CRDs are served
// and returns errGroupCRDsServed when they are; nil when ctx ends.
func watchGroupCRDs(ctx context.Context, dc discovery.DiscoveryInterface, interval time.Duration) error {
	klog.FromContext(ctx).Info("Checking for the volume group snapshot CRDs; once served, the controller exits to be restarted with group snapshots on",
		"interval", interval)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := dc.ServerResourcesForGroupVersion(groupVersion); err == nil {
			return errGroupCRDsServed
		}
	}
}
