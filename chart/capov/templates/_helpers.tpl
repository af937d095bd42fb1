{{/* Labels of every object of the chart. */}}
{{- define "capov.labels" -}}
app.kubernetes.io/name: capov
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
cluster.x-k8s.io/provider: infrastructure-ovirt
{{- end -}}

{{/* The manager's service account. */}}
{{- define "capov.serviceAccountName" -}}capov-controller-manager{{- end -}}

{{/* Rules on the namespaced objects the operator reads in the namespaces it watches, besides OVirtClusters and
OVirtMachines: templates, CAPI Clusters and Machines, and Secrets by name (bootstrap data, `<cluster>-kubeconfig`).
In the ClusterRole when every namespace is watched, else in the watched namespace's Role. */}}
{{- define "capov.watchedNamespaceRules" -}}
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["ovirtmachinetemplates"]
  verbs: ["get", "list", "watch"]
# status.capacity and status.nodeInfo, which the cluster autoscaler reads to scale up from zero.
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["ovirtmachinetemplates/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["clusters", "machines"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# Static addresses (spec.nics[].addressesFromPools): CAPOV creates the machines' IPAddressClaims and, when it lets
# them go, deletes them and removes its finalizer; it only reads the IPAddresses an IPAM provider writes.
- apiGroups: ["ipam.cluster.x-k8s.io"]
  resources: ["ipaddressclaims"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["ipam.cluster.x-k8s.io"]
  resources: ["ipaddresses"]
  verbs: ["get", "list", "watch"]
{{- end -}}

{{/* featureGates map -> "a=true,b=false", sorted by gate name (range walks a map in key order). */}}
{{- define "capov.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $value := .Values.featureGates -}}
{{- $gates = append $gates (printf "%s=%v" $name $value) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* Whether to render the ServiceMonitor: enabled true, or auto and the cluster serves monitoring.coreos.com/v1. */}}
{{- define "capov.serviceMonitorEnabled" -}}
{{- $enabled := toString .Values.serviceMonitor.enabled -}}
{{- if eq $enabled "true" -}}true
{{- else if eq $enabled "auto" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- else if ne $enabled "false" -}}
{{- fail (printf "serviceMonitor.enabled must be auto, true or false, not %q" $enabled) -}}
{{- end -}}
{{- end -}}

{{/* Whether to render an object of the Prometheus Operator's (monitoring.coreos.com/v1): `value` true, or auto and
the cluster serves that API. `name` is the value's path, for the error message. */}}
{{- define "capov.prometheusOperatorObject" -}}
{{- $enabled := toString .value -}}
{{- if eq $enabled "true" -}}true
{{- else if eq $enabled "auto" -}}
{{- if .root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- else if ne $enabled "false" -}}
{{- fail (printf "%s must be auto, true or false, not %q" .name $enabled) -}}
{{- end -}}
{{- end -}}
