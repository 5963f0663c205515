package writer

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/snapkeeper/snapkeeper/pkg/apis/snapkeeper/v1alpha1"
	"github.com/snapkeeper/snapkeeper/pkg/cachelag"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
)

// SetSchedules gives the Writer the client of snapkeeper's own API, for the
// schedule component's status writes.
func (w *Writer) SetSchedules(c *schedclient.Client) { w.sched = c }

// PatchScheduleStatus merge-patches the status subresource of a
// SnapshotSchedule with status.
func (w *Writer) PatchScheduleStatus(ctx context.Context, s *v1alpha1.SnapshotSchedule, status map[string]any) (*v1alpha1.SnapshotSchedule, error) {
	if w.sched == nil {
		return nil, fmt.Errorf("patch status of SnapshotSchedule %s/%s: the writer has no client of snapkeeper.io", s.Namespace, s.Name)
	}
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	lw := w.lag.Begin(cachelag.Update, s)
	out, err := w.sched.Schedules(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	lw.Done(out, err)
	w.count("snapshotschedules/status", "patch", err)
	if err != nil {
		return nil, fmt.Errorf("patch status of SnapshotSchedule %s/%s: %w", s.Namespace, s.Name, err)
	}
	return out, nil
}
