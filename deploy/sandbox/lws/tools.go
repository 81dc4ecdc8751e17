//go:build tools

// Package tools pins the LeaderWorkerSet controller manager built from this module.
package tools

import _ "sigs.k8s.io/lws/cmd"
