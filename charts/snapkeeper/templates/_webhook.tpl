{{/* Arguments of snapkeeper-webhook: (dict "root" $ "tlsDir" "/path") */}}
{{- define "snapkeeper.webhook.args" -}}
{{- $root := .root }}
{{- $w := $root.Values.webhook }}
- --port={{ $w.port }}
- --tls-cert-file={{ .tlsDir }}/tls.crt
- --tls-private-key-file={{ .tlsDir }}/tls.key
- --v={{ $root.Values.logging.level }}
- --logging-format={{ $root.Values.logging.format }}
{{- if $w.strictPopulators }}
- --strict-populators=true
{{- end }}
{{- if $w.allowCrossNamespaceDataSource }}
- --allow-cross-namespace-data-source=true
{{- end }}
{{- if eq (include "snapkeeper.certMode" $root) "selfManaged" }}
{{- $sm := $root.Values.certificates.selfManaged }}
- --self-managed-certs=true
- --self-managed-cert-dir={{ .tlsDir }}
- --self-managed-secret={{ include "snapkeeper.webhook.secretName" $root }}
- --self-managed-namespace={{ $root.Release.Namespace }}
- --self-managed-webhook-configuration={{ include "snapkeeper.webhook.fullname" $root }}
{{- if and $root.Values.crds.groupConversion.enabled $root.Values.crds.install }}
- --self-managed-conversion-crds={{ include "snapkeeper.groupConversionCRDs" $root | fromJsonArray | join "," }}
{{- end }}
- --self-managed-dns-names={{ include "snapkeeper.webhook.dnsNames" $root | fromJsonArray | join "," }}
- --self-managed-ca-validity={{ $sm.caValidity }}
- --self-managed-cert-validity={{ $sm.certValidity }}
{{- end }}
{{- range $w.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Usernames whose requests skip the webhook: the chart's controller and any configured extra users. */}}
{{- define "snapkeeper.webhook.skipUsers" -}}
{{- $users := list }}
{{- if .Values.controller.enabled }}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "snapkeeper.controller.serviceAccountName" .)) }}
{{- end }}
{{- range .Values.csiSide.rbac.serviceAccounts }}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" .namespace .name) }}
{{- end }}
{{- $users = concat $users .Values.webhook.admission.skipUsers }}
{{- $users | uniq | toJson }}
{{- end }}
