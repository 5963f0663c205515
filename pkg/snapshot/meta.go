package snapshot

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HasFinalizer reports whether obj carries finalizer f.
func HasFinalizer(obj metav1.Object, f string) bool { return slices.Contains(obj.GetFinalizers(), f) }

// HasAnnotation reports whether obj has annotation key with value.
func HasAnnotation(obj metav1.Object, key, value string) bool {
	v, ok := obj.GetAnnotations()[key]
	return ok && v == value
}

// IsDefaultClass reports whether a class's annotations mark it as default.
func IsDefaultClass(annotations map[string]string) bool {
	return annotations[AnnDefaultClass] == "true"
}

// IsBeingDeleted reports whether obj has a deletion timestamp.
func IsBeingDeleted(obj metav1.Object) bool { return obj.GetDeletionTimestamp() != nil }
