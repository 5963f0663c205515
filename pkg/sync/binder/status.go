package binder

import (
	"context"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
	"github.com/snapkeeper/snapkeeper/pkg/sync/workloop"
)

// report records a problem on a snapshot's or a group's status.error, with
// a Warning event, only when the message changes. As the community
// controller: a class problem leaves readyToUse as it is; any other says
// "not ready".
func (c *Controller) report(ctx context.Context, s *scope, p *problem) error {
	msg := snapshot.TrimMessage(p.Message)
	if s.status.says(msg) {
		return nil
	}
	now := metav1.Now()
	status := map[string]any{"error": &snapv1.VolumeSnapshotError{Time: &now, Message: &msg}}
	if r := s.classes; p.Reason != r.getFailed && p.Reason != r.noDefault {
		ready := false
		status["readyToUse"] = &ready
	}
	if err := s.patchStatus(ctx, status); err != nil {
		return err
	}
	c.cfg.Recorder.Event(s.obj, corev1.EventTypeWarning, p.Reason, msg)
	return nil
}

// failed records a problem and re-checks later; the objects a snapshot or
// group waits for re-queue it through the indexes sooner.
func (c *Controller) failed(ctx context.Context, s *scope, p *problem) (workloop.Result, error) {
	if err := c.report(ctx, s, p); err != nil {
		return workloop.Result{}, err
	}
	return workloop.Result{RequeueAfter: c.recheck()}, nil
}

// problem is a condition the user must fix (or wait for); it becomes the
// snapshot's status.error and a Warning event with Reason.
type problem struct {
	Reason  string
	Message string
	// mayBeLag: the problem may only be the informer cache lagging the
	// API server (snapshotSource reads again before reporting it).
	mayBeLag bool
	// cause, when set, is the error of a step that failed (and is retried
	// with the loop's backoff) which the problem shows the user.
	cause error
}

func (p *problem) Error() string { return p.Message }

// Unwrap is the problem's cause.
func (p *problem) Unwrap() error { return p.cause }

func problemf(reason, format string, args ...any) *problem {
	return &problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
