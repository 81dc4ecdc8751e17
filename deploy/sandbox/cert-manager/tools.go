//go:build tools

// Package tools pins cert-manager's root module, whose deploy/crds build.sh copies
// into the cache. Its controller and cainjector are nested modules
// (cmd/controller/go.mod, cmd/cainjector/go.mod) that the module proxy does not
// serve ("reading https://proxy.golang.org/github.com/cert-manager/cert-manager/cmd/controller/@v/v1.21.2.info:
// 404 Not Found"), so nothing of cert-manager runs in the sandbox: only its CRDs.
package tools

import _ "github.com/cert-manager/cert-manager/pkg/apis/certmanager"
