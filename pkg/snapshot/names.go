package snapshot

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// ContentNameFor is the name of the dynamic content of a VolumeSnapshot.
func ContentNameFor(snapshotUID types.UID) string { return "snapcontent-" + string(snapshotUID) }

// GroupContentNameFor is the name of the dynamic content of a group snapshot.
func GroupContentNameFor(groupUID types.UID) string {
	return "groupsnapcontent-" + string(groupUID)
}

// CSIName derives the name passed to CreateSnapshot: "<prefix>-<uid>". With
// uuidLength >= 0 the UID loses its dashes and is cut to that many characters
// (the community flag's default, -1, keeps the UID whole).
// It must match the community sidecar exactly, or a takeover would re-create
// in-flight snapshots under a new name.
func CSIName(prefix string, uid types.UID, uuidLength int) string {
	id := string(uid)
	if uuidLength >= 0 {
		id = strings.ReplaceAll(id, "-", "")
		if len(id) > uuidLength {
			id = id[:uuidLength]
		}
	}
	return fmt.Sprintf("%s-%s", prefix, id)
}

// GroupMemberSuffix is the hex sha256 of the group UID and a volume handle,
// used for the names of member snapshots and contents.
func GroupMemberSuffix(groupUID types.UID, volumeHandle string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(string(groupUID)+volumeHandle)))
}
