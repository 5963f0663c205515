{{/*
RBAC rules, one set per component, with only the verbs each one uses. They
are named templates so that a CSI driver chart that depends on this chart can
put "snapkeeper.rbac.csiSideRules" into its own ClusterRole.
*/}}

{{/* The binder (snapshot controller). No access to Secrets: secrets are the CSI side's business. */}}
{{- define "snapkeeper.rbac.binderRules" -}}
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  # create and delete: the member snapshots of a volume group snapshot.
  verbs: ["get", "list", "watch", "update", "patch", "create", "delete"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots/status"]
  verbs: ["update", "patch"]
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
  verbs: ["get", "list", "watch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshots"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshots/status"]
  verbs: ["update", "patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotcontents"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch"]
# Which drivers have a CSI side: their leader-election and heartbeat Leases
# in any namespace (the no-CSI-side status error, docs/contract.md).
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch"]
{{- if and .Values.controller .Values.controller.enableDistributedSnapshotting }}
{{- /* Distributed snapshotting matches a volume's node affinity against the Nodes. */}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{ include "snapkeeper.rbac.eventRules" . }}
{{- end }}

{{/* The CSI side, in a driver's pods: contents, classes, the secrets the classes name. */}}
{{- define "snapkeeper.rbac.csiSideRules" -}}
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents/status"]
  verbs: ["patch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotclasses"]
  verbs: ["get", "list", "watch"]
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
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses", "volumesnapshots", "volumesnapshotcontents"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["groupsnapshot.storage.k8s.io"]
  resources: ["volumegroupsnapshotclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims", "persistentvolumes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["populator.storage.k8s.io"]
  resources: ["volumepopulators"]
  verbs: ["get", "list", "watch"]
{{- end }}

{{- define "snapkeeper.rbac.eventRules" -}}
- apiGroups: ["", "events.k8s.io"]
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
