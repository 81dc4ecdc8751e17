//go:build tools

// Package tools pins Kubeflow Trainer's controller manager (TrainJob and
// (Cluster)TrainingRuntime controllers plus their webhooks) built from this module.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
