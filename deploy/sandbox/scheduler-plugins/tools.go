//go:build tools

// Package tools pins the scheduler-plugins kube-scheduler (with Coscheduling and the
// other out-of-tree plugins registered) built from this module.
package tools

import _ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
