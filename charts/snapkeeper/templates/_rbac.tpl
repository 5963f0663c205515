{{/*
RBAC rules, one set per component, with only the verbs each one uses. They
are named templates so that a CSI driver chart that depends on this chart can
put "snapkeeper.rbac.csiSideRules" into its own ClusterRole.
*/}}

{{/* The binder (snapshot controller). No access to Secrets: secrets are the CSI side's business.
Every verb is one the binder's code calls (docs/security.md, "What each component may do"):
list and watch feed the informers, get is a live read that bypasses them,
and every write is a merge patch (pkg/writer) except the claim finalizer,
which is an update carrying the read copy's resourceVersion. */}}
{{- define "snapkeeper.rbac.binderRules" -}}
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["list", "watch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  # create and delete: the member snapshots of a volume group snapshot.
  verbs: ["get", "list", "watch", "patch", "create", "delete"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots/status"]
  verbs: ["patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# The status of the member contents of a volume group snapshot (snapshot
# handle, size, readiness), which the binder creates.
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents/status"]
  verbs: ["patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotclasses"]
  verbs: ["list", "watch"]
# get: a dynamic group whose cached copy already holds its finalizer is read
# from the API server before its content is made.
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshots"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshots/status"]
  verbs: ["patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents"]
  verbs: ["list", "watch", "create", "patch", "delete"]
# update, not patch: the pvc-as-source finalizer is written with the
# resourceVersion of the copy it was computed from. Never delete.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "watch", "update"]
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["list", "watch"]
# Which drivers have a CSI side: their leader-election and heartbeat Leases
# in any namespace (the no-CSI-side status error, docs/contract.md).
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["list", "watch"]
{{- if and .Values.controller .Values.controller.enableDistributedSnapshotting }}
{{- /* Distributed snapshotting matches a volume's node affinity against the Nodes. */}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
{{- end }}
{{ include "snapkeeper.rbac.eventRules" . }}
{{- end }}

{{/* The schedule component (--components=...,schedules): it reads the
schedules and writes their status, cuts and deletes the snapshots and group
snapshots they make, and reads the claims they select. Its own role, so
that the binder's stays the community snapshot-controller's. */}}
{{- define "snapkeeper.rbac.scheduleRules" -}}
- apiGroups: ["snapkeeper.io"]
  resources: ["snapshotschedules"]
  verbs: ["list", "watch"]
- apiGroups: ["snapkeeper.io"]
  resources: ["snapshotschedules/status"]
  verbs: ["patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshots"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "watch"]
{{ include "snapkeeper.rbac.eventRules" . }}
{{- end }}

{{/* The CSI side, in a driver's pods: contents, classes, the secrets the classes name.
Secrets: get only, in any namespace, because a class names its secret's
namespace (possibly a template of the snapshot's namespace); never list or
watch, so the CSI side reads exactly the secrets that classes name. */}}
{{- define "snapkeeper.rbac.csiSideRules" -}}
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["list", "watch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents/status"]
  verbs: ["patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotclasses"]
  verbs: ["list", "watch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{ include "snapkeeper.rbac.eventRules" . }}
{{- end }}

{{/* The webhook reads what its rules look up, and writes nothing. */}}
{{- define "snapkeeper.rbac.webhookRules" -}}
# get: the live read of a class the informer does not hold yet.
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots", "volumesnapshotcontents"]
  verbs: ["list", "watch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "watch"]
# get: the live read of the volume of a claim a group selector matches.
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch"]
# Listed on demand (at most every 30 s), never watched.
- apiGroups: ["populator.storage.k8s.io"]
  resources: ["volumepopulators"]
  verbs: ["list"]
{{- end }}

{{/* Events are recorded through the core API (create, and patch to count a repeat). */}}
{{- define "snapkeeper.rbac.eventRules" -}}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* Leader election in one namespace: (dict "lease" "name") */}}
{{- define "snapkeeper.rbac.leaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "update"]
  {{- with .lease }}
  resourceNames: [{{ . | quote }}]
  {{- end }}
{{- end }}
