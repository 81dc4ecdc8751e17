{{/* The labels every object carries (the same as `gangkeeper manifests`). */}}
{{- define "gangkeeper.labels" -}}
app.kubernetes.io/name: gangkeeper
app.kubernetes.io/part-of: gangkeeper
{{- end }}

{{/* The pods' selector; fixed: a Deployment's selector cannot change on upgrade. */}}
{{- define "gangkeeper.selector" -}}
app.kubernetes.io/name: gangkeeper
{{- end }}

{{/* The rendered RBAC rules and webhook entries (webhook/install/ writes them). */}}
{{- define "gangkeeper.rendered" -}}
{{ .Files.Get "files/rendered.yaml" }}
{{- end }}

{{/* "true" unless the config turns autoscaling off everywhere (its `autoscaling`,
     placeholders by default, and every namespace's override): then placeholder pods
     are never made, and their PriorityClass and RBAC are left out, as
     `gangkeeper manifests --autoscaling off` leaves them out. */}}
{{- define "gangkeeper.placeholders" -}}
{{- $config := .Values.config | default dict -}}
{{- $on := ne (toString ($config.autoscaling | default "placeholders")) "off" -}}
{{- range $namespace, $mode := ($config.namespaceAutoscaling | default dict) -}}
{{- if ne (toString $mode) "off" }}{{ $on = true }}{{ end -}}
{{- end -}}
{{- if $on }}true{{ end -}}
{{- end }}

{{- define "gangkeeper.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Where the API server calls the webhooks: the Service, or webhook.url. */}}
{{- define "gangkeeper.clientConfig" -}}
{{- $root := .root -}}
{{- if $root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) .path | quote }}
{{- else }}
service:
  name: gangkeeper
  namespace: {{ $root.Release.Namespace }}
  path: {{ .path }}
  port: 443
{{- end }}
{{- with $root.Values.webhook.caBundle }}
caBundle: {{ . | b64enc }}
{{- end }}
{{- end }}

{{/* Opted-in namespaces only, never kube-system or our own, plus the user's terms. */}}
{{- define "gangkeeper.namespaceSelector" -}}
{{- $extra := .Values.webhook.namespaceSelector -}}
matchLabels:
  gangkeeper.io/enabled: "true"
  {{- with $extra.matchLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  {{- toYaml (sortAlpha (list .Release.Namespace "kube-system")) | nindent 2 }}
{{- with $extra.matchExpressions }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The webhook entries of one configuration (mutating | validating), with the
     values applied to the rendered entries. */}}
{{- define "gangkeeper.webhooks" -}}
{{- $root := .root -}}
{{- $rendered := include "gangkeeper.rendered" $root | fromYaml -}}
{{- $settings := index $root.Values.webhook .kind -}}
{{- $hooks := list -}}
{{- range $entry := index $rendered.webhooks .kind -}}
{{- $hook := deepCopy $entry.hook -}}
{{- $_ := set $hook "clientConfig" (include "gangkeeper.clientConfig" (dict "root" $root "path" $entry.path) | fromYaml) -}}
{{- $_ = set $hook "namespaceSelector" (include "gangkeeper.namespaceSelector" $root | fromYaml) -}}
{{- $_ = set $hook "failurePolicy" $settings.failurePolicy -}}
{{- $_ = set $hook "timeoutSeconds" $root.Values.webhook.timeoutSeconds -}}
{{- $gpuResources := ($root.Values.config | default dict).gpuResources -}}
{{- if and $gpuResources (hasKey $hook "matchConditions") -}}
{{- $test := include "gangkeeper.gpuResourceTest" $gpuResources -}}
{{- $conditions := list -}}
{{- range $condition := $hook.matchConditions -}}
{{- $expression := replace $rendered.defaultGpuResourceTest $test $condition.expression -}}
{{- $conditions = append $conditions (merge (dict "expression" $expression) $condition) -}}
{{- end -}}
{{- $_ = set $hook "matchConditions" $conditions -}}
{{- end -}}
{{- $hooks = append $hooks $hook -}}
{{- end -}}
{{ toYaml $hooks }}
{{- end }}

{{/* CEL: resource name `r` is one of the config's gpuResources patterns, as
     webhook/install/webhooks.py `_resource_test` writes it: a glob is a prefix test
     up to its first wildcard, any other name an equality. */}}
{{- define "gangkeeper.gpuResourceTest" -}}
{{- $tests := list -}}
{{- range $pattern := . -}}
{{- $prefix := regexFind "^[^*?\\[]*" $pattern -}}
{{- $quoted := printf "'%s'" ($prefix | replace "\\" "\\\\" | replace "'" "\\'") -}}
{{- if eq $prefix $pattern -}}
{{- $tests = append $tests (printf "r == %s" $quoted) -}}
{{- else -}}
{{- $tests = append $tests (printf "r.startsWith(%s)" $quoted) -}}
{{- end -}}
{{- end -}}
{{- join " || " $tests -}}
{{- end }}

{{/* cert-manager injects the CA into the Service-based configurations. */}}
{{- define "gangkeeper.webhookAnnotations" -}}
{{- if and (eq .Values.certMode "cert-manager") (not .Values.webhook.url) }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/gangkeeper-serving
{{- end }}
{{- end }}
