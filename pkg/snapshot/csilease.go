package snapshot

import (
	"regexp"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Leases that tell whether a CSI side serves a driver (docs/contract.md,
// "CSI side presence"). A CSI side with leader election holds the
// community-named Lease CSILeaseName(driver); one without (per-node, or
// --leader-election=false) renews a heartbeat Lease of its own, labelled
// LabelCSIHeartbeatDriver.
const (
	CSILeasePrefix       = "external-snapshotter-leader-"
	HeartbeatLeasePrefix = "snapkeeper-csi-"
	// LabelCSIHeartbeatDriver is on heartbeat Leases; its value is the
	// driver name (CSI driver names are valid label values).
	LabelCSIHeartbeatDriver = "snapkeeper.io/csi-heartbeat-driver"
	// LeaseFreshFactor: a Lease counts as alive while its last renewal is
	// younger than this many lease durations.
	LeaseFreshFactor = 2
)

var nonLeaseChars = regexp.MustCompile(`[^a-zA-Z0-9-]`)

// DriverLeaseKey is a driver name as it appears in Lease names: every
// character other than a-z, A-Z, 0-9 and '-' becomes '-'.
func DriverLeaseKey(driver string) string {
	return nonLeaseChars.ReplaceAllString(driver, "-")
}

// CSILeaseName is the leader-election Lease of the CSI side of a driver,
// the same name the community csi-snapshotter uses.
func CSILeaseName(driver string) string { return CSILeasePrefix + DriverLeaseKey(driver) }

// HeartbeatLeaseName is the heartbeat Lease of one CSI side without leader
// election; who is its node or pod name. Names are cut to 253 characters.
func HeartbeatLeaseName(driver, who string) string {
	name := HeartbeatLeasePrefix + DriverLeaseKey(driver) + "-" + strings.ToLower(DriverLeaseKey(who))
	name = strings.ToLower(strings.Trim(name, "-"))
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], "-")
	}
	return name
}

// LeaseDriverKey returns the DriverLeaseKey of the driver a Lease speaks
// for, or false when it is no CSI side Lease.
func LeaseDriverKey(l *coordinationv1.Lease) (string, bool) {
	if d, ok := l.Labels[LabelCSIHeartbeatDriver]; ok && d != "" {
		return DriverLeaseKey(d), true
	}
	if k, ok := strings.CutPrefix(l.Name, CSILeasePrefix); ok && k != "" {
		return k, true
	}
	return "", false
}

// LeaseFreshUntil is when a Lease stops counting as alive: its last
// renewal (or acquisition) plus LeaseFreshFactor lease durations. A Lease
// without a holder, a time or a duration was released or never held: it
// returns the zero time and false.
func LeaseFreshUntil(l *coordinationv1.Lease) (time.Time, bool) {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	last := s.RenewTime
	if last == nil {
		last = s.AcquireTime
	}
	if last == nil {
		return time.Time{}, false
	}
	return last.Add(LeaseFreshFactor * time.Duration(*s.LeaseDurationSeconds) * time.Second), true
}
