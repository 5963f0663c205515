package manifestcheck

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// warnDeniedSources adds a warning to each admitted claim that restores
// from a VolumeSnapshot this set defines but denies: applied together, the
// snapshot would not be created and the claim would wait for it forever.
// It stays a warning, as the webhook would admit the claim alone.
func warnDeniedSources(objs []Object, results []Result) {
	denied := map[string]string{}
	for _, r := range results {
		if r.Kind == snapshot.KindSnapshot && !r.Allowed {
			denied[r.Namespace+"/"+r.Name] = fmt.Sprintf("%s:%d", r.File, r.Document)
		}
	}
	if len(denied) == 0 {
		return
	}
	i := 0
	for _, o := range objs {
		if !judgeable(o.Obj) {
			continue
		}
		r := &results[i]
		i++
		pvc, ok := o.Obj.(*corev1.PersistentVolumeClaim)
		if !ok || !r.Allowed {
			continue
		}
		name := ""
		if ds := pvc.Spec.DataSourceRef; ds != nil && ds.Kind == snapshot.KindSnapshot && ds.Namespace == nil {
			name = ds.Name
		} else if ds := pvc.Spec.DataSource; ds != nil && ds.Kind == snapshot.KindSnapshot {
			name = ds.Name
		}
		if where, bad := denied[pvc.Namespace+"/"+name]; bad && name != "" {
			r.Warnings = append(r.Warnings, fmt.Sprintf(
				"PersistentVolumeClaim %q restores from VolumeSnapshot %q, which this set defines at %s but is denied: fix the snapshot, or the claim stays Pending",
				pvc.Namespace+"/"+pvc.Name, pvc.Namespace+"/"+name, where))
		}
	}
}
