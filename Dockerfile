# syntax=docker/dockerfile:1
# gangkeeper server image.
#
# Stage 1 builds wheels for gangkeeper and every dependency (all ship manylinux wheels, so
# no compiler is needed even here); stage 2 installs them offline into a virtualenv in a
# clean image that has no build tools, runs as a numeric non-root UID (Pod Security
# `restricted` and `runAsNonRoot` can verify it without reading /etc/passwd) and runs
# `gangkeeper`, by default `gangkeeper serve`. Certificates are never baked in: in-cluster
# they come from a Secret (self-managed mode) or cert-manager, locally they are issued
# into --cert-dir at first start.
#
# PYTHON_IMAGE is the official slim image by default; deploy/image/build.sh passes a base
# it makes from Debian's packages, whose python has no pip and is externally managed
# (PEP 668): hence the virtualenvs, which work the same on both.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# Behind a TLS-intercepting proxy pip needs its CA: build.sh mounts the host's bundle and
# names it here. Only this stage sees it; unset, pip uses its own.
ARG PIP_CERT
RUN python3 -m venv /opt/build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY policies/ policies/
COPY webhook/ webhook/
# Only the package's code: a developer's certs/*.key or *.crt must never enter a layer
# (.dockerignore excludes them too).
COPY certs/*.py certs/py.typed certs/
RUN /opt/build/bin/pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH
RUN groupadd --system --gid 65532 gangkeeper \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin gangkeeper
# COPY, not `RUN --mount=type=bind,from=build`: buildah 1.28 (Debian bookworm's podman)
# mounts an empty folder when the build stage came from its cache. The wheels (26 MB)
# stay in this layer. pip is needed only for the install, so it leaves the venv with it
# (setuptools too, which python 3.11's venv adds).
COPY --from=build /wheels /wheels
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-index --find-links=/wheels gangkeeper \
 && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools
WORKDIR /opt/gangkeeper
# The sample manifests, for `IMAGE check --nodes examples/fleet.yaml -f examples/...`
# (`serve` finds the same fleet in the package).
COPY examples/ examples/
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gangkeeper"]
# Without a cluster: listen on all interfaces and serve on the sample fleet the package
# ships, issuing certificates under /tmp, so the root filesystem can be read-only
# (`podman run --read-only` mounts a tmpfs there; with docker add `--tmpfs /tmp`). The
# Deployment passes its own arguments (`serve ...`), which replace these.
CMD ["serve", "--host", "0.0.0.0", "--cert-dir", "/tmp/gangkeeper/certs"]
