// Package v1alpha1 is snapkeeper's own API, group snapkeeper.io: the
// SnapshotSchedule, which cuts VolumeSnapshots (or VolumeGroupSnapshots) of
// the claims it selects at cron-scheduled times and deletes them by a
// retention policy (docs/schedules.md).
//
// +kubebuilder:object:generate=true
// +groupName=snapkeeper.io
package v1alpha1
