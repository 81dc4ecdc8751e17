//go:build tools

// Package tools pins Kueue's controller manager (cmd/kueue) built from this module.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
