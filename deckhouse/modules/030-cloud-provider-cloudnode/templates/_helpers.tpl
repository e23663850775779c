{{- /* The helpers of the module's own: the templates need nothing from Deckhouse's helm_lib, so
they render the same with or without it (the names carry the prefix cloudnode. so they never
meet helm_lib's). */ -}}

{{- define "cloudnode.labels" -}}
{{- $ctx := index . 0 -}}
heritage: deckhouse
module: {{ $ctx.Chart.Name }}
app.kubernetes.io/name: cloudnode
{{- range $k, $v := index . 1 }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end -}}

{{- /* The image of a component: Deckhouse's registry and the digest werf built for
images/<component> (global.modulesImages.digests.cloudProviderCloudnode.<component>). */ -}}
{{- define "cloudnode.image" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{- $digests := (($ctx.Values.global.modulesImages).digests).cloudProviderCloudnode | default dict -}}
{{- $digest := index $digests $component | default "" -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $digest) -}}
{{- fail (printf "global.modulesImages.digests.cloudProviderCloudnode.%s: no image digest for %s" $component $component) -}}
{{- end -}}
{{- printf "%s@%s" $ctx.Values.global.modulesImages.registry.base $digest -}}
{{- end -}}

{{- define "cloudnode.namespace" -}}d8-cloud-provider-cloudnode{{- end -}}

{{- /* The pod settings both Deployments share: control-plane nodes only, hardened, the cloud
credentials from the module's Secret as the providers' environment variables. */ -}}
{{- define "cloudnode.controlPlanePod" -}}
priorityClassName: system-cluster-critical
automountServiceAccountToken: true
imagePullSecrets:
  - name: deckhouse-registry
nodeSelector:
  node-role.kubernetes.io/control-plane: ""
tolerations:
  - key: node-role.kubernetes.io/control-plane
    operator: Exists
    effect: NoSchedule
  - key: node-role.kubernetes.io/master
    operator: Exists
    effect: NoSchedule
  - key: node.cloudprovider.kubernetes.io/uninitialized
    operator: Exists
    effect: NoSchedule
  - key: node.kubernetes.io/unreachable
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 120
  - key: node.kubernetes.io/not-ready
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 120
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- /* A cloud.conf of one [Global] section from (list (list KEY VALUE) ...). Every value is quoted
with the escapes cloudnode's cloud.conf reader knows (\\ \" \n \t), so that none can end its
line, its quotes or add a setting. */ -}}
{{- define "cloudnode.cloudConf" -}}
[Global]
{{- range . }}
{{ index . 0 }} = "{{ index . 1 | toString | replace "\\" "\\\\" | replace "\"" "\\\"" | replace "\n" "\\n" | replace "\t" "\\t" }}"
{{- end }}
{{ end -}}

{{- /* The path a provider that reads its settings from cloud.conf (Proxmox VE) finds the module's
one at, mounted from the credentials Secret; empty for the providers that read environment
variables. */ -}}
{{- define "cloudnode.cloudConfigFile" -}}
{{- if eq .Values.internal.providerClusterConfiguration.provider.name "proxmoxve" -}}
/etc/cloudnode/cloud-config/cloud.conf
{{- end -}}
{{- end -}}

{{- /* A container's side of the credentials Secret: its cloud.conf mounted, or its keys as the
environment. */ -}}
{{- define "cloudnode.credentials" -}}
{{- if include "cloudnode.cloudConfigFile" . -}}
volumeMounts:
  - name: cloud-config
    mountPath: {{ include "cloudnode.cloudConfigFile" . | dir }}
    readOnly: true
{{- else -}}
envFrom:
  - secretRef:
      name: cloudnode-credentials
{{- end -}}
{{- end -}}

{{- /* The pod's side: the volume of the cloud.conf, when there is one. */ -}}
{{- define "cloudnode.credentialsVolumes" -}}
{{- if include "cloudnode.cloudConfigFile" . -}}
volumes:
  - name: cloud-config
    secret:
      secretName: cloudnode-credentials
      items:
        - key: cloud.conf
          path: {{ include "cloudnode.cloudConfigFile" . | base }}
{{- end -}}
{{- end -}}

{{- define "cloudnode.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "cloudnode.leaderElection" -}}
- --leader-elect=true
- --leader-elect-lease-duration=137s
- --leader-elect-renew-deadline=107s
- --leader-elect-retry-period=26s
{{- end -}}

{{- /* The VerticalPodAutoscaler of a Deployment, when Deckhouse's vertical-pod-autoscaler module is
on: (list . NAME CONTAINER MIN-CPU MIN-MEMORY MAX-CPU MAX-MEMORY). */ -}}
{{- define "cloudnode.vpa" -}}
{{- $ctx := index . 0 -}}
{{- if has "vertical-pod-autoscaler" ($ctx.Values.global.enabledModules | default list) }}
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: {{ index . 1 }}
  namespace: {{ include "cloudnode.namespace" $ctx }}
  labels:
    {{- include "cloudnode.labels" (list $ctx (dict "app" (index . 1) "workload-resource-policy.deckhouse.io" "master")) | nindent 4 }}
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ index . 1 }}
  updatePolicy:
    updateMode: Auto
  resourcePolicy:
    containerPolicies:
      - containerName: {{ index . 2 }}
        minAllowed:
          cpu: {{ index . 3 }}
          memory: {{ index . 4 }}
        maxAllowed:
          cpu: {{ index . 5 }}
          memory: {{ index . 6 }}
{{- end }}
{{- end -}}
