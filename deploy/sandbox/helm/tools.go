//go:build tools

// Package tools pins the helm command built from this module: the sandbox's Helm
// tests render, lint, install, upgrade and uninstall the chart with the real binary.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
