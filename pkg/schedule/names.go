package schedule

import (
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The labels and annotation of scheduled snapshots.
const (
	// LabelSchedule is the schedule's name (at most 63 characters, which
	// the CRD enforces, so it is always a valid label value).
	LabelSchedule = "snapkeeper.io/schedule"
	// LabelClaim is the claim's name, only when it is a valid label value
	// (at most 63 characters); the claim itself is read from
	// spec.source.persistentVolumeClaimName.
	LabelClaim = "snapkeeper.io/claim"
	// AnnScheduledTime is the RFC 3339 UTC scheduled time of the run that
	// cut the snapshot.
	AnnScheduledTime = "snapkeeper.io/scheduled-time"
)

const (
	// maxNameLength is the length limit of a DNS subdomain, which
	// VolumeSnapshot names are.
	maxNameLength = 253
	// nameTimeLayout names a scheduled time to the minute, in UTC: cron
	// times are whole minutes, and UTC keeps the two 02:30s of a fall-back
	// night apart.
	nameTimeLayout = "200601021504"
	// hashLength is the hex length of the hash that keeps shortened claim
	// names apart.
	hashLength = 8
)

// SnapshotName is the name of the VolumeSnapshot that schedule cuts of
// claim at scheduled time t: "<schedule>-<claim>-<YYYYMMDDHHMM in UTC>", so
// a retry, a restart or a new leader finds the same name and never cuts
// twice for one time. When that exceeds 253 characters (claim names may be
// up to 253), the claim part is shortened and followed by 8 hex characters
// of an FNV-1a hash of the whole claim name, so distinct claims keep
// distinct names. For a valid schedule name (a DNS subdomain of at most 63
// characters) and claim name (a DNS subdomain) the result is a valid DNS
// subdomain.
func SnapshotName(schedule, claim string, t time.Time) string {
	suffix := "-" + t.UTC().Format(nameTimeLayout)
	if room := maxNameLength - len(schedule) - 1 - len(suffix); len(claim) > room {
		claim = shortenClaim(claim, room)
	}
	return schedule + "-" + claim + suffix
}

// shortenClaim fits claim into room characters: a prefix of it, a hyphen,
// and a hash of all of it.
func shortenClaim(claim string, room int) string {
	h := fnv.New32a()
	h.Write([]byte(claim))
	sum := fmt.Sprintf("%0*x", hashLength, h.Sum32())
	keep := max(room-hashLength-1, 0)
	// A label may not end in '-' and '.' may not be followed by '-'
	// ("a.-b" is no subdomain), so the prefix ends on a letter or digit.
	prefix := strings.TrimRight(claim[:min(keep, len(claim))], "-.")
	if prefix == "" {
		return sum
	}
	return prefix + "-" + sum
}

// GroupName is the VolumeGroupSnapshot's name for a group schedule:
// "<schedule>-<YYYYMMDDHHMM in UTC>".
func GroupName(schedule string, t time.Time) string {
	return schedule + "-" + t.UTC().Format(nameTimeLayout)
}

// Labels returns the labels a scheduled snapshot carries: the template's
// labels, then LabelSchedule and (when claim is a valid label value)
// LabelClaim, which win over the template's. claim is "" for a group
// snapshot. The template is not changed.
func Labels(template map[string]string, schedule, claim string) map[string]string {
	labels := make(map[string]string, len(template)+2)
	maps.Copy(labels, template)
	labels[LabelSchedule] = schedule
	// The claim label is the schedule's alone: a template's value would
	// name the wrong claim, or a claim on a group snapshot.
	delete(labels, LabelClaim)
	if claim != "" && len(validation.IsValidLabelValue(claim)) == 0 {
		labels[LabelClaim] = claim
	}
	return labels
}

// Annotations returns the template's annotations plus AnnScheduledTime
// (which wins). The template is not changed.
func Annotations(template map[string]string, t time.Time) map[string]string {
	annotations := make(map[string]string, len(template)+1)
	maps.Copy(annotations, template)
	annotations[AnnScheduledTime] = t.UTC().Format(time.RFC3339)
	return annotations
}

// ScheduledTime reads AnnScheduledTime from an object's annotations; ok is
// false when it is absent or unparsable.
func ScheduledTime(annotations map[string]string) (t time.Time, ok bool) {
	v, found := annotations[AnnScheduledTime]
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}
