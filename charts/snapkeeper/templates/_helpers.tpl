{{/* Names ---------------------------------------------------------------- */}}

{{- define "snapkeeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-<chart>, shortened so that "<fullname>-controller-metrics" still fits 63 characters. */}}
{{- define "snapkeeper.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "snapkeeper.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "snapkeeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: snapkeeper
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "controller") */}}
{{- define "snapkeeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "snapkeeper.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "snapkeeper.componentLabels" -}}
{{ include "snapkeeper.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "snapkeeper.controller.fullname" -}}
{{ include "snapkeeper.fullname" . }}-controller
{{- end }}

{{- define "snapkeeper.webhook.fullname" -}}
{{ include "snapkeeper.fullname" . }}-webhook
{{- end }}

{{- define "snapkeeper.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create }}
{{- default (include "snapkeeper.controller.fullname" .) .Values.controller.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.controller.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "snapkeeper.webhook.serviceAccountName" -}}
{{- if .Values.webhook.serviceAccount.create }}
{{- default (include "snapkeeper.webhook.fullname" .) .Values.webhook.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.webhook.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "snapkeeper.leaderElectionNamespace" -}}
{{- default .Release.Namespace .Values.controller.leaderElection.namespace }}
{{- end }}

{{/* Image reference: (dict "root" $ "image" .Values.controller.image) */}}
{{- define "snapkeeper.image" -}}
{{- $img := merge (deepCopy (default dict .image)) (deepCopy .root.Values.image) }}
{{- $ref := printf "%s/%s" $img.registry $img.repository | trimPrefix "/" }}
{{- if $img.digest }}
{{- printf "%s@%s" $ref $img.digest }}
{{- else }}
{{- printf "%s:%s" $ref (default .root.Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* Certificates ---------------------------------------------------------- */}}

{{/* The certificate mode with "auto" resolved. */}}
{{- define "snapkeeper.certMode" -}}
{{- $mode := .Values.certificates.mode }}
{{- if eq $mode "auto" }}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate" }}certManager{{ else }}selfManaged{{ end }}
{{- else }}
{{- $mode }}
{{- end }}
{{- end }}

{{- define "snapkeeper.webhook.secretName" -}}
{{- if eq (include "snapkeeper.certMode" .) "existingSecret" }}
{{- required "certificates.existingSecret.name is required in existingSecret mode" .Values.certificates.existingSecret.name }}
{{- else }}
{{- default (printf "%s-tls" (include "snapkeeper.webhook.fullname" .)) .Values.certificates.secretName }}
{{- end }}
{{- end }}

{{/* DNS names the API server uses for the webhook Service. */}}
{{- define "snapkeeper.webhook.dnsNames" -}}
{{- $svc := include "snapkeeper.webhook.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson }}
{{- end }}

{{/* Pod pieces -------------------------------------------------------------- */}}

{{/* Topology spread constraints with the component's labels filled in:
     (dict "root" $ "component" "controller" "constraints" list) */}}
{{- define "snapkeeper.topologySpread" -}}
{{- $selector := fromYaml (include "snapkeeper.selectorLabels" .) }}
{{- $out := list }}
{{- range .constraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- define "snapkeeper.podEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
# The binary sets Go's soft memory limit to 80% of this (pkg/memlimit).
- name: SNAPKEEPER_MEMORY_LIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- end }}

{{/*
The group snapshot CRDs whose conversion webhook is the webhook's /convert
(crds.groupConversion.enabled), as a JSON list.
*/}}
{{- define "snapkeeper.groupConversionCRDs" -}}
{{- list "volumegroupsnapshots.groupsnapshot.storage.k8s.io" "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io" "volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io" | toJson -}}
{{- end }}
