package main

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"
)

// The e2e mock service has no GroupController service: groupServer adds
// one. Its member snapshots live in the mock's own snapshot store, created
// through the mock's CreateSnapshot (so ListSnapshots and GET /snapshots
// show them); the groups themselves live in the injector's groupStore,
// guarded by injector.mu. Every handler runs inside the interceptor, under
// the serialization slot, like the mock's own handlers: faults, counting and
// the call log apply to it as to the other methods, and group and member
// state change together with respect to every other call.

// groupIDPrefix starts every group snapshot id ("group-1"); the mock's
// snapshot ids are decimal counters, so the two never collide.
const groupIDPrefix = "group-"

// group is one volume group snapshot.
type group struct {
	ID   string
	Name string
	// VolumeIDs are the source volumes in request order; SnapshotIDs the
	// members, SnapshotIDs[i] cut from VolumeIDs[i].
	VolumeIDs    []string
	SnapshotIDs  []string
	Parameters   map[string]string
	CreationTime *timestamppb.Timestamp
}

// groupStore holds the groups; guarded by injector.mu.
type groupStore struct {
	byID     map[string]*group
	byName   map[string]string // group name -> id
	memberOf map[string]string // member snapshot id -> group id
	next     int64
}

func newGroupStore() groupStore {
	return groupStore{byID: map[string]*group{}, byName: map[string]string{}, memberOf: map[string]string{}}
}

// memberName is the name a group's member snapshot of volume volumeID is
// created with: deterministic, so a repeated CreateVolumeGroupSnapshot
// finds the same members. A fault's match glob on the group name ("grp-*")
// thus also matches calls about its members by id.
func memberName(groupName, volumeID string) string {
	return groupName + ":" + volumeID
}

// groupServer implements csi.GroupControllerServer on top of the mock's
// controller service.
type groupServer struct {
	csi.UnimplementedGroupControllerServer
	in   *injector
	ctrl csi.ControllerServer
}

func newGroupServer(in *injector, ctrl csi.ControllerServer) *groupServer {
	return &groupServer{in: in, ctrl: ctrl}
}

// GroupControllerGetCapabilities offers CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
// (--hide-capabilities can remove it, see injector.rewriteResponse).
func (g *groupServer) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT,
		}},
	}}}, nil
}

// CreateVolumeGroupSnapshot is idempotent by name: the same name with the
// same set of source volumes and parameters returns the same group (with
// its current readiness); the same name with other volumes or parameters is
// AlreadyExists. Members are created one per volume through the mock's
// CreateSnapshot (with --data-dir, each cuts its volume's data like a
// CreateSnapshot call); when one fails, those created by this call are
// deleted again.
func (g *groupServer) CreateVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	name, vols := req.GetName(), req.GetSourceVolumeIds()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "group snapshot name cannot be empty")
	}
	if len(vols) == 0 {
		return nil, status.Error(codes.InvalidArgument, "group snapshot source_volume_ids cannot be empty")
	}
	seen := map[string]bool{}
	for _, v := range vols {
		if v == "" {
			return nil, status.Error(codes.InvalidArgument, "group snapshot source_volume_ids must not contain an empty id")
		}
		if seen[v] {
			return nil, status.Errorf(codes.InvalidArgument, "volume %q appears twice in source_volume_ids", v)
		}
		seen[v] = true
	}

	if existing := g.in.groupByName(name); existing != nil {
		if !sameSet(existing.VolumeIDs, vols) {
			return nil, status.Errorf(codes.AlreadyExists, "group snapshot %q already exists with source volumes %v", name, existing.VolumeIDs)
		}
		if !sameParameters(existing.Parameters, req.GetParameters()) {
			return nil, status.Errorf(codes.AlreadyExists, "group snapshot %q already exists with other parameters", name)
		}
		vgs, err := g.answer(ctx, existing)
		if err != nil {
			return nil, err
		}
		return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: vgs}, nil
	}

	created := time.Now()
	var ids []string
	for _, v := range vols {
		resp, err := g.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{
			Name:           memberName(name, v),
			SourceVolumeId: v,
			Parameters:     req.GetParameters(),
		})
		if err == nil && g.in.groupOfSnapshot(resp.GetSnapshot().GetSnapshotId()) != "" {
			err = status.Errorf(codes.AlreadyExists, "snapshot %q already belongs to another group snapshot", memberName(name, v))
		}
		if err == nil {
			ids = append(ids, resp.GetSnapshot().GetSnapshotId())
			err = g.cutMember(resp.GetSnapshot().GetSnapshotId(), v)
		}
		if err != nil {
			g.deleteMembers(ctx, ids)
			return nil, status.Errorf(status.Code(err), "creating the member snapshot of volume %q: %s", v, status.Convert(err).Message())
		}
	}
	grp := g.in.addGroup(name, slices.Clone(vols), ids, maps.Clone(req.GetParameters()), timestamppb.New(created))
	vgs, err := g.answer(ctx, grp)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: vgs}, nil
}

// GetVolumeGroupSnapshot returns a group with its members: NotFound for an
// unknown id, InvalidArgument when snapshot_ids is given and is not exactly
// the member set.
func (g *groupServer) GetVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	id := req.GetGroupSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "group_snapshot_id cannot be empty")
	}
	grp := g.in.groupByID(id)
	if grp == nil {
		return nil, status.Errorf(codes.NotFound, "group snapshot %q not found", id)
	}
	if ids := req.GetSnapshotIds(); len(ids) > 0 && !sameSet(ids, grp.SnapshotIDs) {
		return nil, status.Errorf(codes.InvalidArgument, "snapshot_ids %v are not the members %v of group snapshot %q", ids, grp.SnapshotIDs, id)
	}
	vgs, err := g.answer(ctx, grp)
	if err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: vgs}, nil
}

// DeleteVolumeGroupSnapshot deletes every member from the mock's store, then
// the group. An unknown id is success; snapshot_ids that are given and are
// not exactly the member set are FailedPrecondition (a caller that lost
// track of the members).
func (g *groupServer) DeleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	id := req.GetGroupSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "group_snapshot_id cannot be empty")
	}
	grp := g.in.groupByID(id)
	if grp == nil {
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
	}
	if ids := req.GetSnapshotIds(); len(ids) > 0 && !sameSet(ids, grp.SnapshotIDs) {
		return nil, status.Errorf(codes.FailedPrecondition, "snapshot_ids %v are not the members %v of group snapshot %q", ids, grp.SnapshotIDs, id)
	}
	for _, sid := range grp.SnapshotIDs {
		if _, err := g.ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: sid}); err != nil {
			return nil, status.Errorf(status.Code(err), "deleting member snapshot %q: %s", sid, status.Convert(err).Message())
		}
		if g.in.data != nil {
			if err := g.in.data.remove(snapshotKind, sid); err != nil {
				return nil, status.Errorf(status.Code(err), "deleting member snapshot %q: %s", sid, status.Convert(err).Message())
			}
		}
		g.in.forgetMember(sid)
	}
	g.in.removeGroup(id)
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

// cutMember copies the volume's data to a new member snapshot
// (--data-dir).
func (g *groupServer) cutMember(snapshotID, volumeID string) error {
	if g.in.data == nil {
		return nil
	}
	return g.in.data.cutSnapshot(snapshotID, volumeID)
}

// deleteMembers deletes the members a failed CreateVolumeGroupSnapshot
// created, with their data. Failures are logged only: the caller already
// answers with the error that made it give up.
func (g *groupServer) deleteMembers(ctx context.Context, ids []string) {
	ctx = context.WithoutCancel(ctx) // the caller may have given up; the members must still go
	for _, id := range ids {
		if _, err := g.ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: id}); err != nil {
			klog.ErrorS(err, "Deleting a member of a group snapshot that failed", "snapshotID", id)
		}
		if g.in.data != nil {
			if err := g.in.data.remove(snapshotKind, id); err != nil {
				klog.ErrorS(err, "Removing the data of a member of a group snapshot that failed", "snapshotID", id)
			}
		}
	}
}

// answer builds the wire form of grp from the mock's current member
// snapshots (copies: the mock answers with pointers into its store). Faults
// (readiness, size, creation time) are applied later, by rewriteResponse.
func (g *groupServer) answer(ctx context.Context, grp *group) (*csi.VolumeGroupSnapshot, error) {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: grp.ID, CreationTime: grp.CreationTime, ReadyToUse: true}
	for _, sid := range grp.SnapshotIDs {
		resp, err := g.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: sid})
		if err != nil {
			return nil, err
		}
		if len(resp.GetEntries()) == 0 {
			return nil, status.Errorf(codes.Internal, "member snapshot %q of group snapshot %q is gone from the backend", sid, grp.ID)
		}
		s := proto.Clone(resp.GetEntries()[0].GetSnapshot()).(*csi.Snapshot)
		s.GroupSnapshotId = grp.ID
		out.ReadyToUse = out.ReadyToUse && s.GetReadyToUse()
		out.Snapshots = append(out.Snapshots, s)
	}
	return out, nil
}

func (in *injector) groupByName(name string) *group {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.groups.byID[in.groups.byName[name]]
}

func (in *injector) groupByID(id string) *group {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.groups.byID[id]
}

// groupOfSnapshot returns the id of the live group snapshot id belongs to,
// or "".
func (in *injector) groupOfSnapshot(id string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.groups.memberOf[id]
}

// addGroup records a new group and its members (and their names, for
// fault matching and the call log).
func (in *injector) addGroup(name string, vols, ids []string, params map[string]string, created *timestamppb.Timestamp) *group {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.groups.next++
	grp := &group{ID: groupIDPrefix + strconv.FormatInt(in.groups.next, 10), Name: name,
		VolumeIDs: vols, SnapshotIDs: ids, Parameters: params, CreationTime: created}
	in.groups.byID[grp.ID] = grp
	in.groups.byName[name] = grp.ID
	in.names[grp.ID] = name
	for i, sid := range ids {
		in.groups.memberOf[sid] = grp.ID
		in.names[sid] = memberName(name, vols[i])
	}
	return grp
}

// forgetMember forgets a member snapshot deleted from the store.
func (in *injector) forgetMember(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.groups.memberOf, id)
	delete(in.names, id)
}

func (in *injector) removeGroup(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	grp := in.groups.byID[id]
	if grp == nil {
		return
	}
	for _, sid := range grp.SnapshotIDs {
		delete(in.groups.memberOf, sid)
	}
	delete(in.groups.byID, id)
	delete(in.groups.byName, grp.Name)
	delete(in.names, id)
}

// refuseMemberDelete fails a DeleteSnapshot of a member of a live group:
// many drivers do not let a group lose a member, and tests must catch a
// controller that deletes members one by one. With --allow-member-delete
// the member goes, as the CSI hostpath driver lets it (Kubernetes' e2e
// group snapshot tests delete the members' contents one by one); the
// group's later delete finds it gone.
func (in *injector) refuseMemberDelete(req any) error {
	r, ok := req.(*csi.DeleteSnapshotRequest)
	if !ok || in.memberDelete {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	gid := in.groups.memberOf[r.GetSnapshotId()]
	if gid == "" {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition, "snapshot %q belongs to group snapshot %q (%s); delete the group snapshot instead",
		r.GetSnapshotId(), gid, in.groups.byID[gid].Name)
}

// shapeGroup applies NotReady, SizeBytes and NoCreationTime rules and
// per-volume sizes to a group answer (a private copy). Rules are matched
// against the group's name and id and apply to the group and all its
// members alike; per-volume sizes apply per member.
func (in *injector) shapeGroup(method string, vgs *csi.VolumeGroupSnapshot) {
	if vgs == nil {
		return
	}
	id := vgs.GetGroupSnapshotId()
	name := in.nameOf(id)
	if in.notReady(method, id, true) {
		vgs.ReadyToUse = false
		for _, s := range vgs.GetSnapshots() {
			s.ReadyToUse = false
		}
	}
	omit := false
	for _, s := range vgs.GetSnapshots() {
		omit = in.shapeAs(method, name, id, s) || omit
	}
	if omit {
		vgs.CreationTime = nil
	}
}

// GroupEntry is one element of GET /groups: the backend's truth, without
// faults.
type GroupEntry struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	SnapshotIDs     []string          `json:"snapshotIds"`
	SourceVolumeIDs []string          `json:"sourceVolumeIds"`
	Parameters      map[string]string `json:"parameters,omitempty"`
	CreationTime    time.Time         `json:"creationTime"`
	// ReadyToUse: every member is in the store and ready.
	ReadyToUse bool `json:"readyToUse"`
}

// GroupsResponse is the body of GET /groups.
type GroupsResponse struct {
	Groups []GroupEntry `json:"groups"`
}

// listGroups returns the groups with the readiness of their members.
func (in *injector) listGroups(ctx context.Context, ctrl csi.ControllerServer) ([]GroupEntry, error) {
	snaps, err := in.listBackend(ctx, ctrl)
	if err != nil {
		return nil, err
	}
	ready := map[string]bool{}
	for _, s := range snaps {
		ready[s.ID] = s.ReadyToUse
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]GroupEntry, 0, len(in.groups.byID))
	for _, grp := range in.groups.byID {
		e := GroupEntry{ID: grp.ID, Name: grp.Name, SnapshotIDs: slices.Clone(grp.SnapshotIDs),
			SourceVolumeIDs: slices.Clone(grp.VolumeIDs), Parameters: maps.Clone(grp.Parameters),
			CreationTime: grp.CreationTime.AsTime(), ReadyToUse: true}
		for _, sid := range grp.SnapshotIDs {
			e.ReadyToUse = e.ReadyToUse && ready[sid]
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return idLess(out[i].ID, out[j].ID) })
	return out, nil
}

// idLess orders counter-based ids ("9" < "10", "group-9" < "group-10").
func idLess(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

// sameSet reports whether a and b hold the same ids (order and repetition
// ignored).
func sameSet(a, b []string) bool {
	sa := map[string]bool{}
	for _, s := range a {
		sa[s] = true
	}
	sb := map[string]bool{}
	for _, s := range b {
		if !sa[s] {
			return false
		}
		sb[s] = true
	}
	return len(sa) == len(sb)
}

// sameParameters compares parameters, nil and empty being the same.
func sameParameters(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}
