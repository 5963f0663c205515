// Package conversion converts group snapshot objects between the versions
// their CRDs serve (v1beta1, v1beta2 and v1), for the CRD conversion webhook
// the webhook binary serves at /convert (docs/conversion.md).
//
// The versions differ in one field: a VolumeGroupSnapshotContent's member
// list is status.volumeSnapshotHandlePairList (volume and snapshot handle)
// in v1beta1, and status.volumeSnapshotInfoList (the handles, plus the
// member's creation time, readiness and restore size) in v1beta2 and v1.
// Every other field, of every kind, is the same in all three versions.
//
// The rules, all pure:
//   - v1beta2 <-> v1: only apiVersion changes.
//   - to v1beta1: each info becomes a pair; the info fields v1beta1 has no
//     place for are kept in the annotation AnnMemberInfo, so an object read
//     at v1beta1 and written back loses nothing.
//   - from v1beta1: each pair becomes an info; creation time, readiness and
//     restore size come from that annotation when it was written for the
//     same handles, else from the member's VolumeSnapshotContent (Members),
//     else they are left out. Nothing is invented.
//
// Objects are converted as JSON maps so that fields this package does not
// know (a newer schema, unknown annotations) pass through unchanged.
package conversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Group is the API group whose objects this package converts.
const Group = "groupsnapshot.storage.k8s.io"

// Versions, oldest first.
const (
	V1beta1 = "v1beta1"
	V1beta2 = "v1beta2"
	V1      = "v1"
)

// Kinds converted.
const (
	KindGroupSnapshot        = "VolumeGroupSnapshot"
	KindGroupSnapshotContent = "VolumeGroupSnapshotContent"
	KindGroupSnapshotClass   = "VolumeGroupSnapshotClass"
)

// AnnMemberInfo holds, on a VolumeGroupSnapshotContent shown at v1beta1, the
// member fields v1beta1 has no place for (a JSON list of
// {volumeHandle, snapshotHandle, creationTime, readyToUse, restoreSize}).
// It exists only in the v1beta1 form: converting back removes it.
const AnnMemberInfo = "snapkeeper.io/v1beta1-member-info"

// MemberInfo is what a member snapshot's own VolumeSnapshotContent says
// about it; nil fields are unknown.
type MemberInfo struct {
	CreationTime *int64 `json:"creationTime,omitempty"`
	ReadyToUse   *bool  `json:"readyToUse,omitempty"`
	RestoreSize  *int64 `json:"restoreSize,omitempty"`
}

// Members finds the VolumeSnapshotContent of one member of a group: the
// content of driver whose status.snapshotHandle is snapshotHandle and, when
// groupHandle is not empty, whose status.volumeGroupSnapshotHandle is
// groupHandle. ok is false when there is no such content, or more than one.
type Members interface {
	Member(driver, groupHandle, snapshotHandle string) (info MemberInfo, ok bool)
}

// Error is a conversion that cannot be done; its message names the object,
// the rule and the fix.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func errorf(format string, args ...any) error { return &Error{msg: fmt.Sprintf(format, args...)} }

// Convert returns obj at desiredAPIVersion (group/version). obj is not
// modified. members may be nil: fields a v1beta1 object lacks are then
// left out unless its annotation carries them.
func Convert(obj map[string]any, desiredAPIVersion string, members Members) (map[string]any, error) {
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	name := objectName(obj)
	if _, err := versionOf(apiVersion); err != nil {
		return nil, errorf("%s %s: apiVersion %q: %v", kind, name, apiVersion, err)
	}
	to, err := versionOf(desiredAPIVersion)
	if err != nil {
		return nil, errorf("%s %s: desired apiVersion %q: %v", kind, name, desiredAPIVersion, err)
	}
	switch kind {
	case KindGroupSnapshot, KindGroupSnapshotClass, KindGroupSnapshotContent:
	default:
		return nil, errorf("%s %s: kind %q is not converted here: register this webhook only for %s, %s and %s",
			kind, name, kind, KindGroupSnapshot, KindGroupSnapshotContent, KindGroupSnapshotClass)
	}
	out, err := deepCopy(obj)
	if err != nil {
		return nil, errorf("%s %s: %v", kind, name, err)
	}
	out["apiVersion"] = desiredAPIVersion
	if kind != KindGroupSnapshotContent {
		return out, nil
	}
	// The member list is converted by what the object holds, not by the
	// version it claims: CRDs without conversion relabelled objects, so a
	// v1beta2 object may carry a v1beta1 pair list and the other way round.
	if to == V1beta1 {
		err = toPairs(out)
	} else {
		err = toInfos(out, members)
	}
	if err != nil {
		return nil, errorf("%s %s: %v", kind, name, err)
	}
	return out, nil
}

// versionOf checks that apiVersion is Group/<a served version>.
func versionOf(apiVersion string) (string, error) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group != Group {
		return "", fmt.Errorf("not of group %s", Group)
	}
	switch version {
	case V1beta1, V1beta2, V1:
		return version, nil
	}
	return "", fmt.Errorf("version %q is not one of %s, %s, %s", version, V1beta1, V1beta2, V1)
}

func objectName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		return "(unnamed)"
	}
	return name
}

// deepCopy copies a JSON object through JSON, the form it came in.
func deepCopy(obj map[string]any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return Decode(b)
}

// Decode reads one JSON object, keeping numbers as written (json.Number):
// creation times are nanoseconds since 1970, beyond float64's exact range.
func Decode(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if out == nil {
		return nil, errors.New("not a JSON object: null")
	}
	if d.More() {
		return nil, errors.New("not one JSON object: data after its end")
	}
	return out, nil
}
