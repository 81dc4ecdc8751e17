//go:build tools

// Package tools pins the JobSet controller manager built from this module (the
// module's root package is its main).
package tools

import _ "sigs.k8s.io/jobset"
