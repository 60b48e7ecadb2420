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

{{/* config.json: values.config with the vsphere and libvirt parts. */}}
{{- define "hvupdater.configJson" -}}
{{- $vs := dict "servers" .Values.vsphere.servers -}}
{{- $lv := omit .Values.libvirt "pkiSecret" -}}
{{- $cfg := merge (dict "vsphere" $vs "libvirt" $lv) (deepCopy .Values.config) -}}
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
