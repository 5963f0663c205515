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

// EtcdPrefixRange returns every key under prefix with its value, read from
// etcd behind the API server's back (custom resources are stored as JSON).
func (cp *ControlPlane) EtcdPrefixRange(ctx context.Context, prefix string) (map[string][]byte, error) {
	end := []byte(prefix)
	end[len(end)-1]++ // the first key after every key with the prefix
	body := fmt.Sprintf(`{"key":%q,"range_end":%q}`, base64.StdEncoding.EncodeToString([]byte(prefix)), base64.StdEncoding.EncodeToString(end))
	var out struct {
		Kvs []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"kvs"`
	}
	if err := etcdPost(ctx, cp.EtcdURL()+"/v3/kv/range", body, &out); err != nil {
		return nil, err
	}
	kvs := make(map[string][]byte, len(out.Kvs))
	for _, kv := range out.Kvs {
		k, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return nil, err
		}
		v, err := base64.StdEncoding.DecodeString(kv.Value)
		if err != nil {
			return nil, err
		}
		kvs[string(k)] = v
	}
	return kvs, nil
}

// PutInEtcd writes value at key behind the API server's back: how a test
// makes objects look as an older version stored them.
func (cp *ControlPlane) PutInEtcd(ctx context.Context, key string, value []byte) error {
	body := fmt.Sprintf(`{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString(value))
	return etcdPost(ctx, cp.EtcdURL()+"/v3/kv/put", body, nil)
}
