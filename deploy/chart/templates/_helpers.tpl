{{/*
Labels of every object: deploy/base's (app.kubernetes.io/part-of) and Helm's own. Object names are fixed
(durable-csi-*), as deploy/base's: the driver is one per cluster (a CSIDriver, a workflow ID prefix in Temporal).
*/}}
{{- define "durable-csi.labels" -}}
app.kubernetes.io/part-of: durable-csi
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* metadata.labels of an object: the common ones and those given (a dict), in one block. */}}
{{- define "durable-csi.metadataLabels" -}}
labels:
  {{- include "durable-csi.labels" .root | nindent 2 }}
  {{- with .extra }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* registry/repository:tag, or @digest when a digest is set. Takes an image block and the chart (for appVersion). */}}
{{- define "durable-csi.image" -}}
{{- $image := .image -}}
{{- $ref := printf "%s/%s" $image.registry $image.repository | trimPrefix "/" -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $ref $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref (default .root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* image: and imagePullPolicy: lines of a container. */}}
{{- define "durable-csi.imageLines" -}}
image: {{ include "durable-csi.image" . }}
{{- with .image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* The priority class of a Pod kind ("node" or "controller"): its own value, else the chart's class. */}}
{{- define "durable-csi.priorityClassName" -}}
{{- $kind := index .root.Values .kind -}}
{{- if $kind.priorityClassName -}}
{{- $kind.priorityClassName -}}
{{- else if .root.Values.priorityClasses.create -}}
{{- (index .root.Values.priorityClasses .kind).name -}}
{{- end -}}
{{- end -}}

{{/* The kubelet directory without a trailing slash. */}}
{{- define "durable-csi.kubeletDir" -}}
{{- .Values.kubeletDir | trimSuffix "/" -}}
{{- end -}}

{{/* The Temporal identity mode, checked. */}}
{{- define "durable-csi.identityMode" -}}
{{- $mode := .Values.temporal.identity.mode -}}
{{- if not (has $mode (list "mtls" "apiKey" "insecure")) -}}
{{- fail (printf "temporal.identity.mode is %q: mtls, apiKey or insecure (deploy/README.md)" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/*
The Temporal credential of a role ("controller" or "node"): a dict with the volume, the mount and the flags of the
durable-csi container, or empty for insecure. The mount is a directory, never subPath: kubelet then refreshes the
files when the Secret changes (a rotated API key is re-read; certificate rotation needs nothing else of the Pods).
*/}}
{{- define "durable-csi.temporalCredential" -}}
{{- $mode := include "durable-csi.identityMode" .root -}}
{{- $identity := .root.Values.temporal.identity -}}
{{- if eq $mode "mtls" -}}
{{- $dir := "/etc/durable-csi/temporal" -}}
{{- $source := dict "secret" (dict "secretName" (index $identity.mtls (printf "%sSecret" .role)) "defaultMode" 288) -}}
{{- if and (eq .role "node") (eq $identity.mtls.nodeIdentity "host") -}}
{{- $source = dict "hostPath" (dict "path" $identity.mtls.hostPath "type" "Directory") -}}
{{- else if not (has $identity.mtls.nodeIdentity (list "secret" "host")) -}}
{{- fail (printf "temporal.identity.mtls.nodeIdentity is %q: secret or host" $identity.mtls.nodeIdentity) -}}
{{- end -}}
{{- $args := list (printf "--temporal-tls-cert=%s/tls.crt" $dir) (printf "--temporal-tls-key=%s/tls.key" $dir) -}}
{{- if $identity.mtls.ca -}}
{{- $args = append $args (printf "--temporal-tls-ca=%s/ca.crt" $dir) -}}
{{- end -}}
{{- dict "volume" (merge (dict "name" "temporal-tls") $source) "mount" (dict "name" "temporal-tls" "mountPath" $dir "readOnly" true) "args" $args | toJson -}}
{{- else if eq $mode "apiKey" -}}
{{- $dir := "/etc/durable-csi/temporal-api-key" -}}
{{- $volume := dict "name" "temporal-api-key" "secret" (dict "secretName" (index $identity.apiKey (printf "%sSecret" .role)) "defaultMode" 288) -}}
{{- dict "volume" $volume "mount" (dict "name" "temporal-api-key" "mountPath" $dir "readOnly" true) "args" (list (printf "--temporal-api-key-file=%s/api-key" $dir)) | toJson -}}
{{- else -}}
{{- dict | toJson -}}
{{- end -}}
{{- end -}}

{{/* The env of both durable-csi containers: the Temporal ConfigMap's three keys, each by name (never envFrom). */}}
{{- define "durable-csi.temporalEnv" -}}
- name: TEMPORAL_ADDRESS
  valueFrom:
    configMapKeyRef:
      name: durable-csi-temporal
      key: TEMPORAL_ADDRESS
- name: TEMPORAL_NAMESPACE
  valueFrom:
    configMapKeyRef:
      name: durable-csi-temporal
      key: TEMPORAL_NAMESPACE
- name: TEMPORAL_INSECURE
  valueFrom:
    configMapKeyRef:
      name: durable-csi-temporal
      key: TEMPORAL_INSECURE
      optional: true
{{- end -}}

{{/* A sidecar's securityContext: the driver's socket is srwxr-xr-x, owned by 65532. */}}
{{- define "durable-csi.sidecarSecurityContext" -}}
securityContext:
  runAsUser: 65532
  runAsGroup: 65532
  runAsNonRoot: true
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}

{{/* A sidecar's env: the socket, its Pod's IP (it listens there only) and namespace (leader election). */}}
{{- define "durable-csi.sidecarEnv" -}}
- name: ADDRESS
  value: /csi/csi.sock
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/* A sidecar's probes on its named HTTP port. */}}
{{- define "durable-csi.sidecarProbes" -}}
livenessProbe:
  httpGet:
    path: /healthz/leader-election
    port: {{ . }}
  periodSeconds: 20
  timeoutSeconds: 10
  failureThreshold: 1
readinessProbe:
  httpGet:
    path: /healthz/leader-election
    port: {{ . }}
  periodSeconds: 5
  timeoutSeconds: 5
{{- end -}}
