package main

import (
	"context"
	"fmt"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/snapkeeper/snapkeeper/pkg/doctor"
	"github.com/snapkeeper/snapkeeper/pkg/schedclient"
)

// gatherDoctorInput reads what pkg/doctor looks at. Group snapshot kinds
// and SnapshotSchedules that are not served, and Leases, events or
// schedules that may not be read, are left out; anything else that fails
// is an error.
func gatherDoctorInput(ctx context.Context, o *doctorOptions) (doctor.Input, error) {
	in := doctor.Input{Now: time.Now()}
	cfg, kube, snap, err := doctorClients(o.kubeconfig)
	if err != nil {
		return in, err
	}
	all := metav1.ListOptions{}
	ns := o.namespace
	vss, err := snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, all)
	if err != nil {
		return in, fmt.Errorf("listing VolumeSnapshots: %w", err)
	}
	in.Snapshots = vss.Items
	contents, err := snap.SnapshotV1().VolumeSnapshotContents().List(ctx, all)
	if err != nil {
		return in, fmt.Errorf("listing VolumeSnapshotContents: %w", err)
	}
	in.Contents = contents.Items
	classes, err := snap.SnapshotV1().VolumeSnapshotClasses().List(ctx, all)
	if err != nil {
		return in, fmt.Errorf("listing VolumeSnapshotClasses: %w", err)
	}
	in.Classes = classes.Items
	if err := gatherGroups(ctx, snap, ns, &in); err != nil {
		return in, err
	}
	pvcs, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, all)
	if err != nil {
		return in, fmt.Errorf("listing PersistentVolumeClaims: %w", err)
	}
	in.PVCs = pvcs.Items
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, all)
	if err != nil {
		return in, fmt.Errorf("listing PersistentVolumes: %w", err)
	}
	in.PVs = pvs.Items
	leases, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace!=kube-node-lease"})
	switch {
	case err == nil:
		in.Leases, in.LeasesKnown = leases.Items, true
	case !apierrors.IsForbidden(err):
		return in, fmt.Errorf("listing Leases: %w", err)
	}
	if err := gatherDoctorSchedules(ctx, cfg, ns, &in); err != nil {
		return in, err
	}
	for _, kind := range []string{"VolumeSnapshot", "VolumeGroupSnapshot", "SnapshotSchedule"} {
		evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind})
		switch {
		case err == nil:
			in.Events = append(in.Events, evs.Items...)
		case !apierrors.IsForbidden(err):
			return in, fmt.Errorf("listing events: %w", err)
		}
	}
	return in, secretsNamed(ctx, kube, &in)
}

// gatherDoctorSchedules reads the SnapshotSchedules when their CRD is served
// and they may be read: a cluster without them has nothing to say.
func gatherDoctorSchedules(ctx context.Context, cfg *rest.Config, ns string, in *doctor.Input) error {
	sc, err := schedclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	list, err := sc.Schedules(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return nil
	case err != nil:
		return fmt.Errorf("listing SnapshotSchedules: %w", err)
	}
	in.Schedules = list.Items
	return nil
}

// gatherGroups reads the group snapshot kinds when they are served.
func gatherGroups(ctx context.Context, snap snapclient.Interface, ns string, in *doctor.Input) error {
	all := metav1.ListOptions{}
	gv := snap.GroupsnapshotV1()
	groups, err := gv.VolumeGroupSnapshots(ns).List(ctx, all)
	if apierrors.IsNotFound(err) {
		return nil // the group CRDs are not installed
	}
	if err != nil {
		return fmt.Errorf("listing VolumeGroupSnapshots: %w", err)
	}
	in.Groups = groups.Items
	gcs, err := gv.VolumeGroupSnapshotContents().List(ctx, all)
	if err != nil {
		return fmt.Errorf("listing VolumeGroupSnapshotContents: %w", err)
	}
	in.GroupContents = gcs.Items
	gcls, err := gv.VolumeGroupSnapshotClasses().List(ctx, all)
	if err != nil {
		return fmt.Errorf("listing VolumeGroupSnapshotClasses: %w", err)
	}
	in.GroupClasses = gcls.Items
	return nil
}
