//go:build tools

// Package tools pins the Kueue controller manager built from this module.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
