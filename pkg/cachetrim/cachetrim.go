// Package cachetrim holds the informer transforms that keep what the
// controllers and the webhook never read out of their caches.
package cachetrim

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// DropManagedFields is an informer transform that removes
// metadata.managedFields from every object before it enters the cache.
// Nothing in the controllers or the webhook reads them, and they are a
// large part of each object: on a VolumeSnapshotContent written by four
// field managers they outweigh its spec and status. An update sent from a
// cached copy keeps the live managedFields: the API server keeps them when
// the request has none.
func DropManagedFields(obj any) (any, error) {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return obj, nil
	}
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
