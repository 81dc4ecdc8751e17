//go:build tools

// Package tools pins the kwok controller built from this module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
