//go:build tools

// Package tools pins KubeRay's ray-operator built from this module (the module's
// root package is its main).
package tools

import _ "github.com/ray-project/kuberay/ray-operator"
