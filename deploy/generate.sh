#!/usr/bin/env bash
# Regenerate the rendered parts of deploy/ from webhook/install/ (a unit test fails
# when they differ from what is committed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
gangkeeper manifests --write deploy/base
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
gangkeeper manifests --cert-mode cert-manager --write "$tmp" >/dev/null
cp "$tmp/certificate.yaml" deploy/overlays/cert-manager/certificate.yaml
gangkeeper manifests --helm-chart deploy/helm/gangkeeper >/dev/null
cp deploy/grafana/gangkeeper-dashboard.json deploy/helm/gangkeeper/files/dashboard.json
