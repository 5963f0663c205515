{{/*
snapkeeper.csiSide.container renders one container that runs snapkeeper's CSI
side (the csi-snapshotter replacement) in a CSI driver's controller pod, next
to the driver's socket. A driver chart that lists this chart as a dependency
(with controller/webhook/crds disabled if another release runs them) puts it
into its own pod spec:

  containers:
    - name: my-driver
      ...
    {{- include "snapkeeper.csiSide.container" (dict
          "image" "ghcr.io/snapkeeper/snapkeeper:0.1.0"
          "socketVolume" "socket-dir"
          "socketDir" "/csi") | nindent 4 }}

Parameters (a dict; only image is required):
  image           image reference
  name            container name (default "snapkeeper-csi-side")
  socketVolume    volume holding the driver socket (default "socket-dir")
  socketDir       where that volume is mounted (default "/csi")
  socketName      socket file name (default "csi.sock")
  httpPort        port of --http-endpoint; 0 disables it (default 8081)
  leaderElection  bool (default true); the Lease is
                  external-snapshotter-leader-<driver name>
  timeout         CSI call timeout (default "1m")
  extraCreateMetadata  bool (default true)
  groupSnapshots  bool (default true): --feature-gates=CSIVolumeGroupSnapshot
                  (volume group snapshots, when the driver supports them)
  logLevel        klog -v (default 2)
  extraArgs       list of extra arguments (for example
                  --snapshot-name-prefix=..., --node-deployment=true)
  resources       container resources
  pullPolicy      (default IfNotPresent)
  runAsUser       UID of the container; default unset: the pod's, else the
                  image's (root, as the community sidecar runs, so it can
                  connect to a driver socket owned by root with mode 0755).
                  Set it to the socket owner's UID to run non-root.
The ServiceAccount of the pod needs the rules of
"snapkeeper.rbac.csiSideRules" (csiSide.rbac in this chart creates them).
*/}}
{{- define "snapkeeper.csiSide.container" -}}
{{- $socketDir := default "/csi" .socketDir }}
{{- $httpPort := 8081 }}
{{- if hasKey . "httpPort" }}{{ $httpPort = .httpPort }}{{ end }}
{{- $leader := true }}
{{- if hasKey . "leaderElection" }}{{ $leader = .leaderElection }}{{ end }}
{{- $extraMeta := true }}
{{- if hasKey . "extraCreateMetadata" }}{{ $extraMeta = .extraCreateMetadata }}{{ end -}}
- name: {{ default "snapkeeper-csi-side" .name }}
  image: {{ required "snapkeeper.csiSide.container: image is required" .image }}
  imagePullPolicy: {{ default "IfNotPresent" .pullPolicy }}
  args:
    - --components=csi
    - --csi-address={{ $socketDir }}/{{ default "csi.sock" .socketName }}
    - --v={{ default 2 .logLevel }}
    - --timeout={{ default "1m" .timeout }}
    - --extra-create-metadata={{ $extraMeta }}
    - --feature-gates=CSIVolumeGroupSnapshot={{ ne .groupSnapshots false }}
    - --leader-election={{ $leader }}
    {{- if $leader }}
    - --leader-election-namespace=$(POD_NAMESPACE)
    {{- end }}
    {{- if $httpPort }}
    - --http-endpoint=:{{ $httpPort }}
    {{- end }}
    {{- range .extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    # --node-deployment handles only the contents labelled for this node.
    - name: NODE_NAME
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
  {{- if $httpPort }}
  ports:
    - name: snapshot-http
      containerPort: {{ $httpPort }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: {{ if $leader }}/healthz/leader-election{{ else }}/healthz{{ end }}
      port: snapshot-http
    initialDelaySeconds: 10
    periodSeconds: 10
    timeoutSeconds: 5
    failureThreshold: 6
  {{- end }}
  volumeMounts:
    - name: {{ default "socket-dir" .socketVolume }}
      mountPath: {{ $socketDir }}
  {{- with .resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- if hasKey . "runAsUser" }}
    runAsUser: {{ .runAsUser }}
    {{- end }}
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
{{- end }}
