// Package snapscheduler converts snapscheduler's SnapshotSchedules
// (snapscheduler.backube/v1) into snapkeeper's (snapkeeper.io/v1alpha1),
// saying what changes in meaning, and names the labels by which the
// snapshots snapscheduler cut are found and adopted. It is pure: objects
// in, objects and notes out; cmd/snapctl reads and writes them.
// docs/schedules.md, "Coming from snapscheduler", has the mapping.
package snapscheduler

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/schedule"
)

// The source kind, and the label snapscheduler gives each snapshot it
// cuts (its value is the schedule's name).
var (
	GroupVersion = schema.GroupVersion{Group: "snapscheduler.backube", Version: "v1"}
	Resource     = GroupVersion.WithResource("snapshotschedules")
)

const (
	Kind          = "SnapshotSchedule"
	LabelSchedule = "snapscheduler.backube/schedule"
)

// maxName is the longest schedule name: it becomes the value of the
// snapkeeper.io/schedule label of each snapshot.
const maxName = 63

// source is the part of snapscheduler's spec that is converted.
type source struct {
	ClaimSelector metav1.LabelSelector `json:"claimSelector"`
	Disabled      bool                 `json:"disabled"`
	Schedule      string               `json:"schedule"`
	Retention     struct {
		Expires  string `json:"expires"`
		MaxCount *int32 `json:"maxCount"`
	} `json:"retention"`
	SnapshotTemplate struct {
		Labels            map[string]string `json:"labels"`
		SnapshotClassName string            `json:"snapshotClassName"`
	} `json:"snapshotTemplate"`
}

// known are the spec fields converted, by path; any other is reported.
var known = map[string][]string{
	"":                 {"claimSelector", "disabled", "schedule", "retention", "snapshotTemplate"},
	"retention":        {"expires", "maxCount"},
	"snapshotTemplate": {"labels", "snapshotClassName"},
}

// Result is one source object's conversion: the schedule, or Err saying
// why it cannot be converted as it is; Notes say what changes in meaning.
type Result struct {
	Namespace, Name string
	Schedule        *v1alpha1.SnapshotSchedule
	Notes           []string
	Err             error
}

// Source is "namespace/name" of the object converted.
func (r Result) Source() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// IsSource reports whether u is one of snapscheduler's SnapshotSchedules.
func IsSource(u *unstructured.Unstructured) bool {
	return u.GetAPIVersion() == GroupVersion.String() && u.GetKind() == Kind
}

// Convert converts one snapscheduler SnapshotSchedule; the result keeps
// its name and namespace.
func Convert(u *unstructured.Unstructured) Result {
	r := Result{Namespace: u.GetNamespace(), Name: u.GetName()}
	spec, _, err := unstructured.NestedMap(u.Object, "spec")
	if err != nil {
		r.Err = fmt.Errorf("spec: %w", err)
		return r
	}
	var src source
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &src); err != nil {
		r.Err = fmt.Errorf("spec: %w", err)
		return r
	}
	r.Notes = append(r.Notes, unconverted(spec)...)
	s := &v1alpha1.SnapshotSchedule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "SnapshotSchedule"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace},
		Spec:       v1alpha1.SnapshotScheduleSpec{ClaimSelector: src.ClaimSelector},
	}
	var errs []string
	if len(r.Name) > maxName {
		errs = append(errs, fmt.Sprintf("its name has %d characters; a snapkeeper schedule's name has at most %d, as the value of the %s label of each snapshot: rename it", len(r.Name), maxName, schedule.LabelSchedule))
	}
	if _, err := metav1.LabelSelectorAsSelector(&src.ClaimSelector); err != nil {
		errs = append(errs, "spec.claimSelector: "+err.Error())
	}
	line, tz, note := SplitTimeZone(src.Schedule)
	s.Spec.Schedule = line
	if tz != "" {
		s.Spec.TimeZone = &tz
		r.Notes = append(r.Notes, note)
	}
	if _, err := schedule.Parse(line, tz); err != nil {
		errs = append(errs, fmt.Sprintf("spec.schedule %q: %v", src.Schedule, err))
	}
	if src.Disabled {
		s.Spec.Suspend = ptr(true)
		r.Notes = append(r.Notes, "disabled: true is suspend: true; retention still deletes while suspended")
	}
	ret, notes, err := retention(src.Retention.MaxCount, src.Retention.Expires)
	s.Spec.Retention = ret
	r.Notes = append(r.Notes, notes...)
	if err != nil {
		errs = append(errs, err.Error())
	}
	if l := src.SnapshotTemplate.Labels; len(l) > 0 {
		s.Spec.SnapshotTemplate.Labels = l
		if _, ok := l[LabelSchedule]; ok {
			r.Notes = append(r.Notes, "snapshotTemplate.labels sets "+LabelSchedule+": new snapshots carry it, so a later --adopt takes them too (harmless)")
		}
	}
	if c := src.SnapshotTemplate.SnapshotClassName; c != "" {
		s.Spec.SnapshotTemplate.VolumeSnapshotClassName = &c
	}
	if len(errs) > 0 {
		r.Err = errors.New(strings.Join(errs, "; "))
		return r
	}
	r.Schedule = s
	return r
}

// SplitTimeZone takes a leading "TZ=<zone> " or "CRON_TZ=<zone> " off a
// cron line: snapkeeper refuses it in spec.schedule and reads the zone
// from spec.timeZone. note says what moved.
func SplitTimeZone(line string) (rest, tz, note string) {
	trimmed := strings.TrimSpace(line)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if v, ok := strings.CutPrefix(trimmed, prefix); ok {
			zone, cron, _ := strings.Cut(v, " ")
			return strings.TrimSpace(cron), zone, fmt.Sprintf("the %s%s prefix of the schedule is spec.timeZone: %s", prefix, zone, zone)
		}
	}
	return trimmed, "", ""
}

// retention maps maxCount and expires. A snapscheduler schedule without
// either keeps every snapshot forever; a snapkeeper schedule must have a
// retention, and inventing one could delete what was meant to stay, so
// that is refused with the choices.
func retention(maxCount *int32, expires string) (v1alpha1.RetentionPolicy, []string, error) {
	var r v1alpha1.RetentionPolicy
	var notes []string
	if maxCount == nil && expires == "" {
		return r, nil, errors.New("it has no retention (neither retention.maxCount nor retention.expires), so snapscheduler keeps every snapshot; " +
			"a snapkeeper schedule needs a retention: add one of them to the source (a large maxCount keeps nearly everything), " +
			"or write spec.retention of the converted schedule yourself")
	}
	if maxCount != nil {
		if *maxCount < 1 {
			return r, nil, fmt.Errorf("retention.maxCount %d: must be at least 1", *maxCount)
		}
		r.KeepLast = ptr(*maxCount)
		notes = append(notes, fmt.Sprintf("retention.maxCount %d is keepLast %d: it counts only ready snapshots (snapscheduler counted every one), "+
			"keeps those not ready yet that are newer than the newest ready one, and deletes a failed one once a newer one is ready", *maxCount, *maxCount))
	}
	if expires != "" {
		if _, err := schedule.ParseMaxAge(expires); err != nil {
			return r, nil, fmt.Errorf("retention.expires: %w", err)
		}
		r.MaxAge = &expires
		notes = append(notes, fmt.Sprintf("retention.expires %s is maxAge %s: it never deletes a claim's newest ready snapshot, however old (snapscheduler deleted every expired one)", expires, expires))
	}
	return r, notes, nil
}

// unconverted names the spec fields that have no counterpart here.
func unconverted(spec map[string]any) []string {
	var out []string
	paths := make([]string, 0, len(known))
	for p := range known {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		m := spec
		if p != "" {
			sub, ok := spec[p].(map[string]any)
			if !ok {
				continue
			}
			m = sub
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !slices.Contains(known[p], k) {
				field := "spec." + k
				if p != "" {
					field = "spec." + p + "." + k
				}
				out = append(out, field+" is not converted: snapkeeper has no such field")
			}
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
