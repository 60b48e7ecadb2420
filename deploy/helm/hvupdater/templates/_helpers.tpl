{{/* The labels every object carries: the app name and values.commonLabels. */}}
{{- define "hvupdater.labels" -}}
app.kubernetes.io/name: hvupdater
{{- range $k, $v := .Values.commonLabels }}
{{ $k }}: {{ $v }}
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
kubernetes part without its empty strings: in-cluster). */}}
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
{{- $cfg := merge (dict "vsphere" $vs "libvirt" $lv "kubernetes" $kube) (deepCopy .Values.config) -}}
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
