package main

import (
	"slices"
	"sort"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// callLogMax bounds the call log; older entries are dropped (and counted).
const callLogMax = 20000

// CallLogEntry is one CSI call as GET /calllog shows it. Secrets appear only
// as their sorted keys: their values never leave the driver.
type CallLogEntry struct {
	// Seq numbers the calls from 1 and never repeats, also across
	// DELETE /calllog, so "?since=<seq>" pages safely.
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Method is the short method name ("CreateSnapshot"); FullMethod the
	// gRPC one.
	Method     string `json:"method"`
	FullMethod string `json:"fullMethod"`
	// Name is the CreateSnapshot (CreateVolumeGroupSnapshot) name, or the
	// name the snapshot (group) a call by id is about was created with;
	// SnapshotID the id a call is about (DeleteSnapshot, ListSnapshots
	// filter) or the one a CreateSnapshot answered.
	Name           string `json:"name,omitempty"`
	SnapshotID     string `json:"snapshotId,omitempty"`
	SourceVolumeID string `json:"sourceVolumeId,omitempty"`
	// VolumeID is the volume a CreateVolume answered or a DeleteVolume
	// deleted; a CreateVolume's Name is the volume name and its SnapshotID
	// the snapshot it restores from (its content source), if any.
	VolumeID string `json:"volumeId,omitempty"`
	// GroupSnapshotID is the group a group call is about (or a
	// CreateVolumeGroupSnapshot answered), or the group the snapshot of a
	// snapshot call belongs to.
	GroupSnapshotID string `json:"groupSnapshotId,omitempty"`
	// SourceVolumeIDs are the volumes of a CreateVolumeGroupSnapshot;
	// SnapshotIDs the members a CreateVolumeGroupSnapshot answered, or the
	// snapshot_ids a Get/DeleteVolumeGroupSnapshot passed.
	SourceVolumeIDs []string          `json:"sourceVolumeIds,omitempty"`
	SnapshotIDs     []string          `json:"snapshotIds,omitempty"`
	SecretKeys      []string          `json:"secretKeys,omitempty"`
	Parameters      map[string]string `json:"parameters,omitempty"`
	// Code is the gRPC result code name ("OK", "Unavailable").
	Code string `json:"code"`
	// ReadyToUse, SizeBytes and HasCreationTime describe the snapshot a
	// CreateSnapshot answered, as the caller saw it (after faults);
	// ReadyToUse and HasCreationTime also the group a Create- or
	// GetVolumeGroupSnapshot answered.
	ReadyToUse      *bool `json:"readyToUse,omitempty"`
	SizeBytes       int64 `json:"sizeBytes,omitempty"`
	HasCreationTime bool  `json:"hasCreationTime,omitempty"`
	// Entries is the number of snapshots a ListSnapshots answered.
	Entries *int `json:"entries,omitempty"`
}

// CallLogResponse is the body of GET /calllog.
type CallLogResponse struct {
	Entries []CallLogEntry `json:"entries"`
	// Last is the highest seq handed out so far (0: none).
	Last int64 `json:"last"`
	// Dropped counts entries removed to keep the log bounded.
	Dropped int64 `json:"dropped"`
}

type callLog struct {
	max     int
	seq     int64
	dropped int64
	entries []CallLogEntry
}

func (l *callLog) add(e CallLogEntry) {
	l.seq++
	e.Seq = l.seq
	l.entries = append(l.entries, e)
	if over := len(l.entries) - l.max; over > 0 {
		// Drop the oldest by reslicing: append moves the log to a new
		// array only when the old one is used up, so a full log costs
		// amortized O(1) per call. Copying the whole log on every call
		// (20,000 entries, megabytes) took a saturated benchmark machine's
		// CPU from the API server once a run passed 20,000 calls.
		clear(l.entries[:over]) // the dropped entries' strings and maps
		l.entries = l.entries[over:]
		l.dropped += int64(over)
	}
}

// since returns a copy of the entries after seq.
func (l *callLog) since(seq int64) CallLogResponse {
	i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Seq > seq })
	out := make([]CallLogEntry, len(l.entries)-i)
	copy(out, l.entries[i:])
	return CallLogResponse{Entries: out, Last: l.seq, Dropped: l.dropped}
}

func (l *callLog) reset() {
	l.entries = nil
	l.dropped = 0
}

// nameOf returns the name snapshot (or group) id was created with ("" if
// unknown).
func (in *injector) nameOf(id string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.names[id]
}

// record appends one call to the log; resp is nil for failed calls; name is
// the name of the snapshot the call is about, as known before the call (a
// DeleteSnapshot forgets it).
func (in *injector) record(fullMethod string, req, resp any, code codes.Code, name string) {
	e := CallLogEntry{Time: time.Now().UTC(), Method: shortMethod(fullMethod), FullMethod: fullMethod, Code: code.String(), Name: name}
	switch r := req.(type) {
	case *csi.CreateSnapshotRequest:
		e.Name, e.SourceVolumeID = r.GetName(), r.GetSourceVolumeId()
		e.SecretKeys, e.Parameters = keysOf(r.GetSecrets()), copyMap(r.GetParameters())
		if cr, ok := resp.(*csi.CreateSnapshotResponse); ok && cr.GetSnapshot() != nil {
			s := cr.GetSnapshot()
			ready := s.GetReadyToUse()
			e.SnapshotID, e.ReadyToUse, e.SizeBytes, e.HasCreationTime = s.GetSnapshotId(), &ready, s.GetSizeBytes(), s.GetCreationTime() != nil
		}
	case *csi.DeleteSnapshotRequest:
		e.SnapshotID, e.SecretKeys = r.GetSnapshotId(), keysOf(r.GetSecrets())
	case *csi.CreateVolumeRequest:
		e.Name, e.SnapshotID = r.GetName(), r.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
		e.SecretKeys, e.Parameters = keysOf(r.GetSecrets()), copyMap(r.GetParameters())
		if vr, ok := resp.(*csi.CreateVolumeResponse); ok && vr.GetVolume() != nil {
			e.VolumeID = vr.GetVolume().GetVolumeId()
		}
	case *csi.DeleteVolumeRequest:
		e.VolumeID, e.SecretKeys = r.GetVolumeId(), keysOf(r.GetSecrets())
	case *csi.ListSnapshotsRequest:
		e.SnapshotID, e.SourceVolumeID, e.SecretKeys = r.GetSnapshotId(), r.GetSourceVolumeId(), keysOf(r.GetSecrets())
		if lr, ok := resp.(*csi.ListSnapshotsResponse); ok && lr != nil {
			n := len(lr.GetEntries())
			e.Entries = &n
		}
	case *csi.CreateVolumeGroupSnapshotRequest:
		e.Name, e.SourceVolumeIDs = r.GetName(), slices.Clone(r.GetSourceVolumeIds())
		e.SecretKeys, e.Parameters = keysOf(r.GetSecrets()), copyMap(r.GetParameters())
		if gr, ok := resp.(*csi.CreateVolumeGroupSnapshotResponse); ok && gr.GetGroupSnapshot() != nil {
			e.describeGroup(gr.GetGroupSnapshot(), true)
		}
	case *csi.GetVolumeGroupSnapshotRequest:
		e.GroupSnapshotID, e.SnapshotIDs, e.SecretKeys = r.GetGroupSnapshotId(), slices.Clone(r.GetSnapshotIds()), keysOf(r.GetSecrets())
		if gr, ok := resp.(*csi.GetVolumeGroupSnapshotResponse); ok && gr.GetGroupSnapshot() != nil {
			e.describeGroup(gr.GetGroupSnapshot(), false)
		}
	case *csi.DeleteVolumeGroupSnapshotRequest:
		e.GroupSnapshotID, e.SnapshotIDs, e.SecretKeys = r.GetGroupSnapshotId(), slices.Clone(r.GetSnapshotIds()), keysOf(r.GetSecrets())
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if e.Name == "" && e.SnapshotID != "" {
		e.Name = in.names[e.SnapshotID]
	}
	if e.Name == "" && e.GroupSnapshotID != "" {
		e.Name = in.names[e.GroupSnapshotID]
	}
	if e.GroupSnapshotID == "" && e.SnapshotID != "" {
		e.GroupSnapshotID = in.groups.memberOf[e.SnapshotID]
	}
	in.log.add(e)
}

// describeGroup fills in the group an answer carried; members: also its
// member ids.
func (e *CallLogEntry) describeGroup(g *csi.VolumeGroupSnapshot, members bool) {
	ready := g.GetReadyToUse()
	e.GroupSnapshotID, e.ReadyToUse, e.HasCreationTime = g.GetGroupSnapshotId(), &ready, g.GetCreationTime() != nil
	if members {
		for _, s := range g.GetSnapshots() {
			e.SnapshotIDs = append(e.SnapshotIDs, s.GetSnapshotId())
		}
	}
}

func keysOf(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
