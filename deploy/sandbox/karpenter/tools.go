//go:build tools

// Package tools pins Karpenter's kwok provider (the Karpenter controller whose
// cloud provider creates kwok nodes) built from this module.
package tools

import _ "sigs.k8s.io/karpenter/kwok"
