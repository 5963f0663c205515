package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotSchedule cuts a VolumeSnapshot of each claim its claimSelector
// selects (or, with groupSnapshot, one VolumeGroupSnapshot of them all) at
// each time of its cron schedule, and deletes the ones its retention does
// not keep. Deleting a schedule keeps its snapshots.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=snapsched,categories=snapkeeper
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name: at most 63 characters, as the value of the snapkeeper.io/schedule label it gives each snapshot"
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Time zone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Next",type=string,format=date-time,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Kept",type=integer,JSONPath=`.status.kept`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SnapshotSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SnapshotScheduleSpec `json:"spec"`
	// +optional
	Status SnapshotScheduleStatus `json:"status,omitempty"`
}

// SnapshotScheduleSpec is what a schedule cuts, when, and what it keeps.
type SnapshotScheduleSpec struct {
	// Schedule is a cron line of five fields (minute hour day-of-month
	// month day-of-week) or one of @yearly, @annually, @monthly, @weekly,
	// @daily, @midnight, @hourly, read as a CronJob's schedule is.
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`

	// TimeZone is the IANA name of the time zone the schedule and the
	// calendar retention buckets are read in (Europe/Berlin,
	// America/New_York); UTC when absent.
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`

	// ClaimSelector selects the PersistentVolumeClaims of the schedule's
	// namespace to snapshot. An empty selector selects every claim of the
	// namespace.
	ClaimSelector metav1.LabelSelector `json:"claimSelector"`

	// SnapshotTemplate is what each cut snapshot (or group snapshot)
	// carries.
	// +optional
	SnapshotTemplate SnapshotTemplate `json:"snapshotTemplate,omitempty"`

	// GroupSnapshot, when set, cuts one VolumeGroupSnapshot of all the
	// selected claims at each time (crash-consistent across them) instead
	// of one VolumeSnapshot per claim.
	// +optional
	GroupSnapshot *GroupSnapshotTemplate `json:"groupSnapshot,omitempty"`

	// Retention says which of the schedule's snapshots are kept; at least
	// one of its fields is required.
	Retention RetentionPolicy `json:"retention"`

	// Suspend stops new runs; retention still applies.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// StartingDeadlineSeconds bounds how late a run may start: after
	// downtime, the most recent missed time is run once if it is at most
	// this many seconds old, and every other missed time is skipped and
	// counted. Without it, the most recent missed time is always run.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
}

// SnapshotTemplate is the metadata and class of the snapshots a schedule
// cuts.
type SnapshotTemplate struct {
	// Labels are added to each snapshot, beside the schedule's own
	// snapkeeper.io/schedule and snapkeeper.io/claim labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are added to each snapshot.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// VolumeSnapshotClassName is the class of each VolumeSnapshot; the
	// default class of the claim's driver when absent.
	// +optional
	VolumeSnapshotClassName *string `json:"volumeSnapshotClassName,omitempty"`
}

// GroupSnapshotTemplate turns a schedule into a group schedule.
type GroupSnapshotTemplate struct {
	// VolumeGroupSnapshotClassName is the class of each
	// VolumeGroupSnapshot; the default group class of the claims' driver
	// when absent.
	// +optional
	VolumeGroupSnapshotClassName *string `json:"volumeGroupSnapshotClassName,omitempty"`
}

// RetentionPolicy keeps snapshots the way restic and kopia do: the count
// rules add up (a snapshot is kept when any of them keeps it), and maxAge,
// when set, deletes what is older whatever the count rules say. Only ready
// snapshots count and are kept by a rule; the newest ready snapshot of a
// claim (or of the group series) is always kept.
type RetentionPolicy struct {
	// KeepLast keeps the newest n ready snapshots.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`
	// Hourly keeps the newest ready snapshot of each of the last n hours
	// that have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Hourly *int32 `json:"hourly,omitempty"`
	// Daily keeps the newest ready snapshot of each of the last n days
	// that have one, in the schedule's time zone.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Daily *int32 `json:"daily,omitempty"`
	// Weekly keeps the newest ready snapshot of each of the last n ISO
	// weeks (Monday to Sunday) that have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Weekly *int32 `json:"weekly,omitempty"`
	// Monthly keeps the newest ready snapshot of each of the last n
	// calendar months that have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Monthly *int32 `json:"monthly,omitempty"`
	// Yearly keeps the newest ready snapshot of each of the last n
	// calendar years that have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Yearly *int32 `json:"yearly,omitempty"`
	// MaxAge deletes snapshots older than this (a Go duration such as
	// 36h, or a number of days or weeks: 7d, 2w), except the newest ready
	// one. Alone, it keeps every ready snapshot younger than this.
	// +optional
	MaxAge *string `json:"maxAge,omitempty"`
}

// SnapshotScheduleStatus is what the schedule last did.
type SnapshotScheduleStatus struct {
	// ObservedGeneration is the generation of the spec this status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready says whether the schedule cuts and keeps as its
	// spec asks, with the reason when it does not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastScheduleTime is the scheduled time of the last run.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime is the next scheduled time (none while suspended).
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// LastSuccessfulTime is the scheduled time of the last run whose
	// snapshots all became ready.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// MissedRuns counts the scheduled times skipped since the schedule
	// was created: past startingDeadlineSeconds, or while the controller
	// was down beyond the one catch-up run.
	// +optional
	MissedRuns int64 `json:"missedRuns,omitempty"`
	// LastMissedTime is the most recent scheduled time skipped; runs
	// resume after it (and after lastScheduleTime).
	// +optional
	LastMissedTime *metav1.Time `json:"lastMissedTime,omitempty"`
	// Kept is the number of the schedule's snapshots that exist now.
	// +optional
	Kept int32 `json:"kept,omitempty"`
	// Claims describes each selected claim's snapshots (the group series
	// in group mode, under the name of the schedule), by name; at most
	// MaxClaimStatuses entries, the rest counted in ClaimsNotListed.
	// +listType=map
	// +listMapKey=name
	// +optional
	Claims []ClaimStatus `json:"claims,omitempty"`
	// ClaimsNotListed counts the claims left out of Claims.
	// +optional
	ClaimsNotListed int32 `json:"claimsNotListed,omitempty"`
}

// MaxClaimStatuses bounds status.claims, so that the status of a schedule
// over thousands of claims stays far below the API server's object size
// limit.
const MaxClaimStatuses = 200

// ClaimStatus is the schedule's snapshots of one claim.
type ClaimStatus struct {
	// Name is the claim's name (the schedule's in group mode).
	Name string `json:"name"`
	// Kept is the number of its snapshots that exist.
	Kept int32 `json:"kept"`
	// Ready is how many of them are ready to use.
	Ready int32 `json:"ready"`
	// Failed is how many of them carry an error and are not ready.
	Failed int32 `json:"failed"`
	// LastSnapshot is the newest snapshot's name.
	// +optional
	LastSnapshot string `json:"lastSnapshot,omitempty"`
	// LastReadySnapshot is the newest ready snapshot's name.
	// +optional
	LastReadySnapshot string `json:"lastReadySnapshot,omitempty"`
}

// SnapshotScheduleList is a list of SnapshotSchedules.
//
// +kubebuilder:object:root=true
type SnapshotScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SnapshotSchedule `json:"items"`
}
