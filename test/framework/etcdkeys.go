package framework

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
)

// SnapshotKey is the etcd key of VolumeSnapshot namespace/name under the
// API server's default prefix.
func SnapshotKey(namespace, name string) string {
	return "/registry/snapshot.storage.k8s.io/volumesnapshots/" + namespace + "/" + name
}

// RemoveFromEtcd deletes key from etcd behind the API server's back,
// through etcd's JSON gateway, and says how many keys went. Watchers get a
// delete event carrying the object's last stored state, finalizers and
// all: the outcome of a DELETE that raced a finalizer's write (upstream
// kubernetes/kubernetes#77988), made on demand.
func (cp *ControlPlane) RemoveFromEtcd(ctx context.Context, key string) (int64, error) {
	var out struct {
		Deleted string `json:"deleted"`
	}
	body := fmt.Sprintf(`{"key":%q}`, base64.StdEncoding.EncodeToString([]byte(key)))
	if err := etcdPost(ctx, cp.EtcdURL()+"/v3/kv/deleterange", body, &out); err != nil {
		return 0, err
	}
	if out.Deleted == "" {
		return 0, nil
	}
	return strconv.ParseInt(out.Deleted, 10, 64)
}

// GroupSnapshotKey is the etcd key of VolumeGroupSnapshot namespace/name.
func GroupSnapshotKey(namespace, name string) string {
	return "/registry/groupsnapshot.storage.k8s.io/volumegroupsnapshots/" + namespace + "/" + name
}
