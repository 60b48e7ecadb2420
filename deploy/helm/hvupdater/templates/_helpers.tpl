{{/* The labels the selectors use: the stable subset of the recommended labels (a
Deployment's selector cannot change after install). */}}
{{- define "hvupdater.selectorLabels" -}}
app.kubernetes.io/name: hvupdater
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{/* The labels every object carries: Kubernetes' and Helm's recommended labels and
values.commonLabels. scripts/render-manifests.py drops helm.sh/chart and
app.kubernetes.io/managed-by from the kustomize and clusterctl renderings (Helm does not
manage those). */}}
{{- define "hvupdater.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
{{ include "hvupdater.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: runtime-extension
app.kubernetes.io/part-of: cluster-api
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- range $k, $v := .Values.commonLabels }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* The image reference: image.ref, or image.repository:image.tag (tag: appVersion). */}}
{{- define "hvupdater.image" -}}
{{- if .Values.image.ref -}}
{{ .Values.image.ref }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* config.json: values.config with the vsphere, libvirt and kubernetes parts (the
kubernetes part without its empty strings: in-cluster) and, with kubevirt.enabled, the
in-cluster kubevirt part: {} (every namespace), or one cluster bounded to
kubevirt.namespaces; followInfraClusterSecretRef true with kubevirt.followInfraClusterSecretRef. */}}
{{- define "hvupdater.configJson" -}}
{{- range .Values.vsphere.servers }}
{{- if and (eq (.identityFrom | default "") "capv") (not $.Values.capvIdentity.enabled) }}
{{- fail (printf "vsphere.servers %s: identityFrom capv needs capvIdentity.enabled" .name) }}
{{- end }}
{{- end }}
{{- $vs := dict "servers" .Values.vsphere.servers -}}
{{- $lv := omit .Values.libvirt "pkiSecret" -}}
{{- $kube := dict -}}
{{- range $k, $v := .Values.kubernetes }}
{{- if ne (toString $v) "" }}{{- $_ := set $kube $k $v }}{{- end }}
{{- end }}
{{- $parts := dict "vsphere" $vs "libvirt" $lv "kubernetes" $kube -}}
{{- if .Values.kubevirt.enabled }}
{{- $kvns := .Values.kubevirt.namespaces | default list | uniq -}}
{{- if $kvns }}
{{- $_ := set $parts "kubevirt" (dict "clusters" (list (dict "namespaces" $kvns))) }}
{{- else }}
{{- $_ := set $parts "kubevirt" dict }}
{{- end }}
{{- if .Values.kubevirt.followInfraClusterSecretRef }}
{{- $_ := set $parts.kubevirt "followInfraClusterSecretRef" true }}
{{- end }}
{{- else if .Values.kubevirt.followInfraClusterSecretRef }}
{{- fail "kubevirt.followInfraClusterSecretRef needs kubevirt.enabled" }}
{{- end }}
{{- $cfg := merge $parts (omit (deepCopy .Values.config) "kubevirt") -}}
{{ toPrettyJson $cfg }}
{{- end -}}

{{/* The config ConfigMap's name: a hash of its content, so a change rolls the pods. */}}
{{- define "hvupdater.configName" -}}
hvupdater-config-{{ include "hvupdater.configJson" . | sha256sum | trunc 10 }}
{{- end -}}

{{/* The port the probes use: the status listener when on, else the hooks port. */}}
{{- define "hvupdater.probePort" -}}
{{ if .Values.metrics.enabled }}metrics{{ else }}https{{ end }}
{{- end -}}

{{/* The namespace every namespaced object goes into: the release's (helm -n), quoted so
that a namespace such as "on" or "2024" stays a string. */}}
{{- define "hvupdater.namespace" -}}
{{ .Release.Namespace | quote }}
{{- end -}}

{{/* The KubeVirt backend's rules on the namespaced VM resources (docs/kubevirt.md, RBAC):
one ClusterRole's without kubevirt.namespaces, each namespace's Role's with them. */}}
{{- define "hvupdater.kubevirtVMRules" -}}
- apiGroups:
    - kubevirt.io
  resources:
    - virtualmachines
  verbs:
    - get
    - list
    - watch
    - patch
- apiGroups:
    - kubevirt.io
  resources:
    - virtualmachineinstances
  verbs:
    - get
- apiGroups:
    - subresources.kubevirt.io
  resources:
    - virtualmachines/restart
  verbs:
    - update
{{- end -}}
