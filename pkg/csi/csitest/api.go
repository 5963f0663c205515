package csitest

import (
	"encoding/json"
	"strings"
	"time"
)

// The Go mirror of the mock driver's HTTP API (hack/tools/kube/mockcsi,
// a separate module, so its types cannot be imported).

// Faults is the body of PUT /faults and the --faults flag.
type Faults struct {
	Rules []Rule `json:"rules"`
}

// Rule is one fault; see hack/tools/kube/mockcsi/faults.go for the full
// semantics. Every rule matching a call applies.
type Rule struct {
	// Method: "CreateSnapshot", "/csi.v1.Controller/CreateSnapshot",
	// "CreateVolumeGroupSnapshot", "/csi.v1.GroupController/...", or
	// "" / "*" for every method.
	Method string `json:"method,omitempty"`
	// Match: path.Match glob on the snapshot (or group snapshot) name or id
	// of the call. Group members are named "<group name>:<volume id>".
	Match string `json:"match,omitempty"`
	// Times: only the first Times matching calls get Latency, Code, Hang.
	Times int `json:"times,omitempty"`
	// Latency before the call reaches the mock.
	Latency Duration `json:"latency,omitempty"`
	// Code: a gRPC code name such as "Unavailable".
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// AfterCall: fail after the mock performed the call.
	AfterCall bool `json:"afterCall,omitempty"`
	// NotReady: first N CreateSnapshot / ListSnapshots(id) answers per
	// snapshot id report readyToUse=false (Probe: ready=false); first N
	// Create/GetVolumeGroupSnapshot answers per group report the group and
	// all its members not ready.
	NotReady int `json:"notReady,omitempty"`
	// Hang / HangUntilDeadline: hold a CreateSnapshot (or
	// CreateVolumeGroupSnapshot) after the snapshot (group) was created.
	Hang              Duration `json:"hang,omitempty"`
	HangUntilDeadline bool     `json:"hangUntilDeadline,omitempty"`
	// SizeBytes: CreateSnapshot / ListSnapshots / group answers about the
	// matching snapshots report this size (the mock itself says 0, unknown).
	// A per-volume size (Mock.SetVolumeSizes) wins over it.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// NoCreationTime: those answers carry no creation time, and no size
	// unless a SizeBytes rule applies too.
	NoCreationTime bool `json:"noCreationTime,omitempty"`
}

// Duration is a time.Duration that travels as "250ms".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// FaultsState is the body of GET /faults.
type FaultsState struct {
	Version int64  `json:"version"`
	Source  string `json:"source"`
	Faults
}

// Calls counts calls by full gRPC method and result code name, as in
// GET /calls: calls["/csi.v1.Controller/CreateSnapshot"]["OK"].
type Calls map[string]map[string]int64

// Count returns the calls of a method (full gRPC name or short name such as
// "CreateSnapshot") with the given code name; an empty code counts all.
func (c Calls) Count(method, code string) int64 {
	var n int64
	for m, byCode := range c {
		if m != method && m[strings.LastIndex(m, "/")+1:] != method {
			continue
		}
		for k, v := range byCode {
			if code == "" || k == code {
				n += v
			}
		}
	}
	return n
}

// BackendSnapshot is one entry of GET /snapshots: the mock's own state,
// without faults applied.
type BackendSnapshot struct {
	ID             string    `json:"id"`
	Name           string    `json:"name,omitempty"`
	SourceVolumeID string    `json:"sourceVolumeId"`
	ReadyToUse     bool      `json:"readyToUse"`
	CreationTime   time.Time `json:"creationTime"`
	// SizeBytes is the source volume's size if one was set
	// (Mock.SetVolumeSizes), else 0; fault rules do not apply here.
	SizeBytes int64 `json:"sizeBytes"`
	// GroupSnapshotID is set on members of a group snapshot.
	GroupSnapshotID string `json:"groupSnapshotId,omitempty"`
	// Builtin marks "Mock Snapshot 1..3", which the mock starts with.
	Builtin bool `json:"builtin"`
}

// BackendGroup is one entry of GET /groups: a live group snapshot of the
// mock, without faults applied. Secrets are never stored.
type BackendGroup struct {
	ID              string            `json:"id"` // "group-1", ...
	Name            string            `json:"name"`
	SnapshotIDs     []string          `json:"snapshotIds"`     // members, SnapshotIDs[i] of SourceVolumeIDs[i]
	SourceVolumeIDs []string          `json:"sourceVolumeIds"` // in request order
	Parameters      map[string]string `json:"parameters,omitempty"`
	CreationTime    time.Time         `json:"creationTime"`
	// ReadyToUse: every member is in the store and ready.
	ReadyToUse bool `json:"readyToUse"`
}

// VolumeSizes are snapshot sizes in bytes by source volume id, the body of
// GET/PUT/PATCH /volume-sizes: every answer about a snapshot of such a
// volume reports this size.
type VolumeSizes map[string]int64

// CallLogEntry is one CSI call as GET /calllog shows it: secrets appear
// only as their sorted keys.
type CallLogEntry struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Method     string    `json:"method"`     // short: "CreateSnapshot"
	FullMethod string    `json:"fullMethod"` // "/csi.v1.Controller/CreateSnapshot"
	// Name is the CreateSnapshot (CreateVolumeGroupSnapshot) name, or the
	// name the snapshot (group) a call by id is about was created with.
	Name string `json:"name,omitempty"`
	// SnapshotID is the id a call is about, or the one a CreateSnapshot
	// answered.
	SnapshotID     string `json:"snapshotId,omitempty"`
	SourceVolumeID string `json:"sourceVolumeId,omitempty"`
	// VolumeID: the volume a CreateVolume answered or a DeleteVolume
	// deleted (a CreateVolume's SnapshotID is the snapshot it restores
	// from, its Name the volume name).
	VolumeID string `json:"volumeId,omitempty"`
	// GroupSnapshotID is the group a group call is about (or a
	// CreateVolumeGroupSnapshot answered), or the group the snapshot of a
	// snapshot call belongs to.
	GroupSnapshotID string `json:"groupSnapshotId,omitempty"`
	// SourceVolumeIDs: the volumes of a CreateVolumeGroupSnapshot.
	// SnapshotIDs: the members a CreateVolumeGroupSnapshot answered, or the
	// snapshot_ids a Get/DeleteVolumeGroupSnapshot passed.
	SourceVolumeIDs []string          `json:"sourceVolumeIds,omitempty"`
	SnapshotIDs     []string          `json:"snapshotIds,omitempty"`
	SecretKeys      []string          `json:"secretKeys,omitempty"`
	Parameters      map[string]string `json:"parameters,omitempty"`
	Code            string            `json:"code"` // "OK", "Unavailable", ...
	// ReadyToUse, SizeBytes, HasCreationTime: the snapshot a CreateSnapshot
	// answered, as the caller saw it; ReadyToUse and HasCreationTime also
	// the group a Create/GetVolumeGroupSnapshot answered.
	ReadyToUse      *bool `json:"readyToUse,omitempty"`
	SizeBytes       int64 `json:"sizeBytes,omitempty"`
	HasCreationTime bool  `json:"hasCreationTime,omitempty"`
	// Entries: how many snapshots a ListSnapshots answered.
	Entries *int `json:"entries,omitempty"`
}

// CallLog is the body of GET /calllog.
type CallLog struct {
	Entries []CallLogEntry `json:"entries"`
	// Last is the highest seq handed out so far: pass it as since to read
	// only newer calls.
	Last    int64 `json:"last"`
	Dropped int64 `json:"dropped"`
}
