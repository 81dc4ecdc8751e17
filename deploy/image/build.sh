#!/usr/bin/env bash
# Build the gangkeeper image from this checkout, with no container daemon and no
# container registry: a base image is made from Debian bookworm's own packages
# (mmdebstrap), and the Dockerfile is built on it through its PYTHON_IMAGE argument by
# podman (buildah inside). `docker build .` elsewhere still builds on the official
# python image. The build stage fetches wheels from PyPI, hence `--network=host`.
#
#   deploy/image/build.sh            build; the last line printed is the image reference
#   deploy/image/build.sh --check    build, then run tests/deploy/test_image.py on it
#
# GANGKEEPER_IMAGE_REF names the image (default localhost/gangkeeper:<version>). The base
# is cached as localhost/gangkeeper-base:bookworm; `--rebase` makes it again. podman
# reads its settings from deploy/image/containers.conf (why: there).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

check=false
rebase=false
for arg in "$@"; do
  case "$arg" in
    --check) check=true ;;
    --rebase) rebase=true ;;
    *) echo "build.sh: unknown argument $arg (expected --check, --rebase)" >&2; exit 2 ;;
  esac
done

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)"
image="${GANGKEEPER_IMAGE_REF:-localhost/gangkeeper:${version}}"
base=localhost/gangkeeper-base:bookworm
export CONTAINERS_CONF="$PWD/deploy/image/containers.conf"

# What Debian calls the tools; installed only when one is missing.
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if ((${#missing[@]})); then
  echo "build.sh: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if $rebase || ! podman image exists "$base"; then
  echo "build.sh: making $base from Debian bookworm packages" >&2
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # python3-venv brings ensurepip's wheels (Debian's python has no pip of its own);
  # passwd: the Dockerfile's groupadd/useradd. The merged-usr hook lays out /usr itself,
  # so the usrmerge package, and the perl it needs (about 55 MB), stay out. No docs, man
  # pages or locales: an image nobody reads them in (licences stay).
  mmdebstrap --quiet --variant=minbase \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include=python3.11,python3.11-venv,python3-venv,passwd,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$work/base.tar" >&2
  podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    "$work/base.tar" "$base" >&2
fi

# The CA bundle pip trusts on this machine (a TLS-intercepting proxy's, say), for the
# build stage's `pip wheel`: mounted for the build only, never copied into a layer.
trust=()
cert="${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}"
if [[ -n "$cert" && -f "$cert" ]]; then
  trust=(--volume "$cert:/run/gangkeeper-build/ca.crt:ro"
         --build-arg PIP_CERT=/run/gangkeeper-build/ca.crt)
fi
podman build --network=host --pull=never --build-arg "PYTHON_IMAGE=$base" "${trust[@]}" \
  --tag "$image" --file Dockerfile . >&2
size="$(podman image inspect --format '{{.Size}}' "$image")"
echo "build.sh: $image is $((size / 1000000)) MB" >&2

if $check; then
  GANGKEEPER_IMAGE=require GANGKEEPER_IMAGE_REF="$image" \
    python3 -m pytest -q -p no:cacheprovider tests/deploy/test_image.py >&2
fi
echo "$image"
