package validationtest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
)

// NewSchedule returns an hourly SnapshotSchedule that keeps the last 3
// snapshots of every claim of its namespace: add Selecting, WithClass or
// InGroupMode.
func NewSchedule(namespace, name string, opts ...Opt) *v1alpha1.SnapshotSchedule {
	keep := int32(3)
	return apply(&v1alpha1.SnapshotSchedule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "SnapshotSchedule"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid")},
		Spec: v1alpha1.SnapshotScheduleSpec{
			Schedule:  "@hourly",
			Retention: v1alpha1.RetentionPolicy{KeepLast: &keep},
		},
	}, opts)
}

// Cron sets the cron line of a schedule.
func Cron(line string) Opt {
	return func(o metav1.Object) { must[*v1alpha1.SnapshotSchedule]("Cron", o).Spec.Schedule = line }
}

// InTimeZone sets the time zone of a schedule.
func InTimeZone(tz string) Opt {
	return func(o metav1.Object) { must[*v1alpha1.SnapshotSchedule]("InTimeZone", o).Spec.TimeZone = &tz }
}

// WithRetention replaces the retention of a schedule.
func WithRetention(r v1alpha1.RetentionPolicy) Opt {
	return func(o metav1.Object) { must[*v1alpha1.SnapshotSchedule]("WithRetention", o).Spec.Retention = r }
}

// InGroupMode makes a schedule cut group snapshots, with the named group
// class, or the default one when class is "-".
func InGroupMode(class string) Opt {
	return func(o metav1.Object) {
		g := &v1alpha1.GroupSnapshotTemplate{}
		if class != "-" {
			g.VolumeGroupSnapshotClassName = &class
		}
		must[*v1alpha1.SnapshotSchedule]("InGroupMode", o).Spec.GroupSnapshot = g
	}
}
