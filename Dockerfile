# syntax=docker/dockerfile:1
# gangkeeper server image.
#
# Stage 1 builds wheels for gangkeeper and every dependency (all ship manylinux wheels, so
# no compiler is needed even here); stage 2 installs them offline into a clean slim image
# that has no build tools, runs as a numeric non-root UID (Pod Security `restricted` and
# `runAsNonRoot` can verify it without reading /etc/passwd) and starts `gangkeeper serve`.
# Certificates are never baked in: in-cluster they come from a Secret (self-managed mode)
# or cert-manager, locally they are issued into --cert-dir at first start.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY policies/ policies/
COPY webhook/ webhook/
# Only the package's code: a developer's certs/*.key or *.crt must never enter a layer
# (.dockerignore excludes them too).
COPY certs/*.py certs/py.typed certs/
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN groupadd --system --gid 65532 gangkeeper \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin gangkeeper
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels gangkeeper
WORKDIR /opt/gangkeeper
# The sample fleet and manifests: `docker run IMAGE` serves on them with no cluster.
COPY examples/ examples/
# Default --cert-dir (./certs) for a local `docker run`; in-cluster it is a mounted volume.
RUN mkdir certs && chown 65532:65532 certs
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gangkeeper", "serve"]
# Without a cluster: listen on all interfaces and use the shipped sample fleet. The
# Deployment passes its own arguments, which replace these.
CMD ["--host", "0.0.0.0", "--nodes", "/opt/gangkeeper/examples/fleet.yaml"]
