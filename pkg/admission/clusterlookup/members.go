package clusterlookup

import (
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"k8s.io/client-go/tools/cache"

	"github.com/snapkeeper/snapkeeper/pkg/conversion"
)

// indexBySnapshotHandle indexes VolumeSnapshotContents by driver and
// status.snapshotHandle.
const indexBySnapshotHandle = "snapkeeper.io/driver-snapshot-handle"

// ContentMembers answers conversion.Members from the webhook's cache of
// VolumeSnapshotContents.
type ContentMembers struct{ indexer cache.Indexer }

// NewContentMembers adds its index to the factory's VolumeSnapshotContent
// informer; call it before the factory starts.
func NewContentMembers(snaps snapinformers.SharedInformerFactory) (*ContentMembers, error) {
	inf := snaps.Snapshot().V1().VolumeSnapshotContents().Informer()
	err := inf.AddIndexers(cache.Indexers{indexBySnapshotHandle: func(obj any) ([]string, error) {
		c, ok := obj.(*snapv1.VolumeSnapshotContent)
		if !ok || c.Status == nil || c.Status.SnapshotHandle == nil || *c.Status.SnapshotHandle == "" {
			return nil, nil
		}
		return []string{c.Spec.Driver + "/" + *c.Status.SnapshotHandle}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing VolumeSnapshotContents by snapshot handle: %w", err)
	}
	return &ContentMembers{indexer: inf.GetIndexer()}, nil
}

// Member implements conversion.Members: the one content of driver with that
// snapshot handle (and, when groupHandle is set, of that group).
func (m *ContentMembers) Member(driver, groupHandle, snapshotHandle string) (conversion.MemberInfo, bool) {
	objs, err := m.indexer.ByIndex(indexBySnapshotHandle, driver+"/"+snapshotHandle)
	if err != nil {
		return conversion.MemberInfo{}, false
	}
	var found *snapv1.VolumeSnapshotContent
	for _, o := range objs {
		c, ok := o.(*snapv1.VolumeSnapshotContent)
		if !ok {
			continue
		}
		if g := c.Status.VolumeGroupSnapshotHandle; groupHandle != "" && (g == nil || *g != groupHandle) {
			continue
		}
		if found != nil {
			return conversion.MemberInfo{}, false // two claim the handle: say nothing
		}
		found = c
	}
	if found == nil {
		return conversion.MemberInfo{}, false
	}
	return conversion.MemberInfo{
		CreationTime: found.Status.CreationTime,
		ReadyToUse:   found.Status.ReadyToUse,
		RestoreSize:  found.Status.RestoreSize,
	}, true
}
