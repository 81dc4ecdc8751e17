//go:build tools

// Package tools pins what the sandbox builds from this module: the scheduler-plugins
// kube-scheduler (with Coscheduling and the other out-of-tree plugins registered) and
// its controller (PodGroup and ElasticQuota status).
package tools

import (
	_ "sigs.k8s.io/scheduler-plugins/cmd/controller"
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
