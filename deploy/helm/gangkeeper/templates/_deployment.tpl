{{/* One Deployment of `gangkeeper serve` (webhook/install/deployment.py renders the
     same): dict "root" (the chart's context), "name" (the Deployment and its pods'
     app.kubernetes.io/name), "container", "mode" (--no-controller, --controller-only
     or ""), "replicas", "resources", "affinity". */}}
{{- define "gangkeeper.deployment" -}}
{{- $root := .root -}}
{{- $name := .name -}}
{{- $self := eq $root.Values.certMode "self" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gangkeeper.labels" $root | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
  strategy:
    type: RollingUpdate
    # Never below one ready replica: the mutating webhook fails closed (and a
    # controller standby is ready to take the Lease).
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ $name }}
        app.kubernetes.io/part-of: gangkeeper
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # `serve` reads its config at start: a changed config rolls the pods.
        checksum/config: {{ toYaml $root.Values.config | sha256sum }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: gangkeeper
      automountServiceAccountToken: true
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
      - name: {{ .container }}
        image: {{ include "gangkeeper.image" $root }}
        imagePullPolicy: {{ $root.Values.image.pullPolicy }}
        args:
        - serve
        - --config
        - /etc/gangkeeper/config.yaml
        - --cert-dir
        - /var/run/gangkeeper/certs
        - --cert-mode
        - {{ ternary "self" "cert-manager" $self }}
        - --service
        - gangkeeper
        - --host
        - 0.0.0.0
        - --port
        - "8443"
        {{- with .mode }}
        - {{ . }}
        {{- end }}
        env:
        # `serve` reads its namespace (Lease, Secret) and its controller identity from these.
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        ports:
        - name: https
          containerPort: 8443
          protocol: TCP
        startupProbe:
          httpGet:
            path: /healthz
            port: https
            scheme: HTTPS
          periodSeconds: 2
          timeoutSeconds: 2
          failureThreshold: 30
        livenessProbe:
          httpGet:
            path: /healthz
            port: https
            scheme: HTTPS
          periodSeconds: 10
          timeoutSeconds: 2
          failureThreshold: 3
        readinessProbe:
          httpGet:
            path: /readyz
            port: https
            scheme: HTTPS
          periodSeconds: 5
          timeoutSeconds: 2
          failureThreshold: 2
        {{- with .resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop:
            - ALL
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          runAsUser: 65532
          runAsGroup: 65532
          seccompProfile:
            type: RuntimeDefault
        volumeMounts:
        - name: certs
          mountPath: /var/run/gangkeeper/certs
          readOnly: {{ not $self }}
        - name: config
          mountPath: /etc/gangkeeper
          readOnly: true
        - name: tmp
          mountPath: /tmp
      volumes:
      {{- if $self }}
      # Written by the process from the shared Secret; memory-backed, never on disk.
      - name: certs
        emptyDir:
          medium: Memory
          sizeLimit: 1Mi
      {{- else }}
      - name: certs
        secret:
          secretName: gangkeeper-tls
      {{- end }}
      - name: config
        configMap:
          name: gangkeeper-config
      - name: tmp
        emptyDir:
          sizeLimit: 64Mi
{{- end }}
