"""`kubectl apply --dry-run=server -f` answers whether a gang could ever run.

Each workload kind asks for `workers x gpus` on a test's own two nodes of 4 GPUs
(8 in all): 3 x 4 = 12 can never fit and must be refused with the numbers in
kubectl's output; 2 x 4 = 8 fits and passes. Dry run creates nothing either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.cluster import POOL_LABEL, indexed_job, jobset, pytorchjob, unique

NODES, GPUS_PER_NODE = 2, 4
KINDS: list[tuple[str, Callable[..., dict[str, Any]]]] = [
    ("job", indexed_job),
    ("jobset", jobset),
    ("pytorchjob", pytorchjob),
]


def _write(tmp_path: Path, obj: dict[str, Any]) -> Path:
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return path


def _resource(obj: dict[str, Any]) -> str:
    """`plural.group`, unambiguous for kubectl get."""
    group = obj["apiVersion"].split("/")[0]
    plural = {"Job": "jobs", "JobSet": "jobsets", "PyTorchJob": "pytorchjobs"}[obj["kind"]]
    return f"{plural}.{group}"


@pytest.mark.parametrize(("kind", "build"), KINDS)
def test_a_gang_that_can_never_fit_is_refused_by_server_dry_run_with_the_numbers(
    cluster: Any, gang_namespace: str, tmp_path: Path, kind: str, build: Callable[..., Any]
) -> None:
    pool = unique(f"never-{kind}")
    cluster.create_gpu_nodes(pool, NODES, GPUS_PER_NODE, labels={POOL_LABEL: pool})
    workers = NODES + 1
    obj = build(unique(kind), gang_namespace, pool, workers=workers, gpus=GPUS_PER_NODE)

    done = cluster.kubectl(
        "apply", "--dry-run=server", "-f", str(_write(tmp_path, obj)), check=False
    )

    assert done.returncode != 0, f"dry run admitted a gang that cannot fit:\n{done.stdout}"
    message = done.stderr
    assert "denied the request" in message, message
    demand, capacity = workers * GPUS_PER_NODE, NODES * GPUS_PER_NODE
    assert re.search(rf"\b{demand}\b", message), f"demand {demand} not named: {message}"
    assert re.search(rf"\b{capacity}\b", message), f"capacity {capacity} not named: {message}"
    assert "nvidia.com/gpu" in message, message
    got = cluster.kubectl(
        "get", _resource(obj), obj["metadata"]["name"], "-n", gang_namespace, check=False
    )
    assert "NotFound" in got.stderr, "a refused dry run left an object behind"


@pytest.mark.parametrize(("kind", "build"), KINDS)
def test_a_gang_that_fits_passes_server_dry_run_and_nothing_is_created(
    cluster: Any, gang_namespace: str, tmp_path: Path, kind: str, build: Callable[..., Any]
) -> None:
    pool = unique(f"fits-{kind}")
    cluster.create_gpu_nodes(pool, NODES, GPUS_PER_NODE, labels={POOL_LABEL: pool})
    obj = build(unique(kind), gang_namespace, pool, workers=NODES, gpus=GPUS_PER_NODE)

    done = cluster.kubectl(
        "apply", "--dry-run=server", "-f", str(_write(tmp_path, obj)), check=False
    )

    assert done.returncode == 0, done.stderr
    assert "server dry run" in done.stdout
    got = cluster.kubectl(
        "get", _resource(obj), obj["metadata"]["name"], "-n", gang_namespace, check=False
    )
    assert "NotFound" in got.stderr, "dry run created the object"
