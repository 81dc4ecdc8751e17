//go:build tools

// Package tools pins cluster-autoscaler's API module, whose config/crd build.sh
// copies into the cache: the ProvisioningRequest CRD (autoscaling.x-k8s.io/v1).
// cluster-autoscaler itself is not served by the module proxy at a version built
// against this Kubernetes, so nothing of it runs in the sandbox: only its CRD, whose
// status conditions the end-to-end tests write themselves.
package tools

import _ "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
