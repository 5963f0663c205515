// Package validation holds the admission rules for snapshot objects and for
// claims that restore from them (docs/webhook.md), group snapshot objects
// included: VolumeGroupSnapshotClass, VolumeGroupSnapshot and
// VolumeGroupSnapshotContent (class.go, group*.go), and SnapshotSchedules
// (schedule.go). The functions are pure: objects in, field.ErrorList and
// warnings out. Everything they need to know about other
// objects comes through Lookup, backed by informer listers in the webhook and
// by an in-memory set of objects in tests and in offline validation, so the
// same rules serve both.
package validation

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Lookup reads the objects a rule depends on. Every Get returns (nil, nil)
// when the object does not exist: absence is an ordinary answer here (GitOps
// tools create related objects in one sync, in any order), and an error means
// the lookup itself failed.
type Lookup interface {
	// ListClasses returns the classes as the cache knows them.
	ListClasses() ([]*snapv1.VolumeSnapshotClass, error)
	// ListClassesFresh reads the classes from the source of truth (the API
	// server, not a cache), so a class created a moment ago is seen when a
	// new default class is judged.
	ListClassesFresh() ([]*snapv1.VolumeSnapshotClass, error)
	GetClass(name string) (*snapv1.VolumeSnapshotClass, error)
	GetSnapshot(namespace, name string) (*snapv1.VolumeSnapshot, error)
	GetContent(name string) (*snapv1.VolumeSnapshotContent, error)
	// ClassInUse reports whether any content was made from the class: its
	// driver or deletion policy then no longer describes existing snapshots.
	ClassInUse(name string) (bool, error)
	GetPVC(namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// ListPVCs returns the claims of a namespace whose labels match
	// selector: the members a VolumeGroupSnapshot selects.
	ListPVCs(namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error)
	GetPV(name string) (*corev1.PersistentVolume, error)
	// ListGroupClasses, ListGroupClassesFresh and GetGroupClass are the
	// class reads above for VolumeGroupSnapshotClasses. Where the group
	// CRDs are not installed they find nothing: no group object can exist.
	ListGroupClasses() ([]*groupv1.VolumeGroupSnapshotClass, error)
	ListGroupClassesFresh() ([]*groupv1.VolumeGroupSnapshotClass, error)
	GetGroupClass(name string) (*groupv1.VolumeGroupSnapshotClass, error)
	// PopulatorRegistered reports whether a VolumePopulator object
	// (populator.storage.k8s.io) registers group/kind as a data source.
	PopulatorRegistered(group, kind string) (bool, error)
}

// Options are the policy switches an administrator sets with flags.
type Options struct {
	// StrictPopulators denies a claim whose data source kind no VolumePopulator
	// registers. Off by default: registration is optional and populators such
	// as KubeVirt CDI or VolSync work without it.
	StrictPopulators bool
	// AllowCrossNamespaceDataSource admits dataSourceRef.namespace pointing at
	// another namespace (the CrossNamespaceVolumeDataSource feature, which
	// also needs a ReferenceGrant).
	AllowCrossNamespaceDataSource bool
}

// Validator applies the rules with one Lookup and one set of Options. It is a
// small value: the webhook builds one per request around a request-scoped
// Lookup.
type Validator struct {
	Lookup  Lookup
	Options Options
}

// Operation is what is done to the object, with the values of
// admission.k8s.io so the webhook maps it without a table.
type Operation string

// Operations the rules distinguish.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)
