"""Builders of the objects the end-to-end tests send to the API server.

Plain dicts, as kubectl would send them: a GPU pod, an Indexed Job, a JobSet and a
PyTorchJob whose workers select one test's own nodes through `POOL_LABEL`.
"""

from __future__ import annotations

import uuid
from typing import Any

#: Every test labels its nodes with a unique value of this key and selects it.
POOL_LABEL = "e2e.gangkeeper.io/pool"
GPU = "nvidia.com/gpu"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def container(gpus: int, name: str = "trainer") -> dict[str, Any]:
    # GPUs in limits too: that is what gangkeeper's matchConditions look for, and
    # what the device plugin contract requires of real GPU pods.
    return {
        "name": name,
        "image": "registry.invalid/e2e/trainer:1",
        "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
    }


def pod_spec(pool: str, gpus: int, container_name: str = "trainer") -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "nodeSelector": {POOL_LABEL: pool},
        "containers": [container(gpus, container_name)],
    }


def gang_pod(
    name: str,
    pool: str,
    *,
    gpus: int = 1,
    gang: str | None = None,
    min_member: int | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A GPU pod, with gangkeeper's explicit gang annotations when `gang` is given."""
    annotations: dict[str, str] = {}
    if gang is not None:
        annotations["gangkeeper.io/gang-name"] = gang
    if min_member is not None:
        annotations["gangkeeper.io/min-member"] = str(min_member)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": annotations},
        "spec": pod_spec(pool, gpus),
    }


def indexed_job(name: str, namespace: str, pool: str, *, workers: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": workers,
            "parallelism": workers,
            "backoffLimit": 0,
            "template": {"spec": pod_spec(pool, gpus)},
        },
    }


def jobset(name: str, namespace: str, pool: str, *, workers: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": workers,
                            "parallelism": workers,
                            "backoffLimit": 0,
                            "template": {"spec": pod_spec(pool, gpus)},
                        }
                    },
                }
            ]
        },
    }


def pytorchjob(name: str, namespace: str, pool: str, *, workers: int, gpus: int) -> dict[str, Any]:
    """One Master and `workers - 1` Workers, `gpus` each (training-operator v1)."""

    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": pod_spec(pool, gpus, container_name="pytorch")},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers - 1)}},
    }
