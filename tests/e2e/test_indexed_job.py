"""An Indexed Job created with kubectl: kube-controller-manager creates the pods
and gangkeeper's webhook keys and gates each one as it is created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from builders.cluster import POOL_LABEL, indexed_job, unique
from kubernetes import watch

from gangkeeper.policies.names import GATE

WORKERS = 3


def test_each_pod_the_job_controller_creates_is_gang_keyed_and_gated_at_creation(
    cluster: Any, gang_namespace: str, tmp_path: Path
) -> None:
    pool = unique("indexed")
    cluster.create_gpu_nodes(pool, WORKERS, 1, labels={POOL_LABEL: pool})
    job = indexed_job(unique("train"), gang_namespace, pool, workers=WORKERS, gpus=1)
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    # The gang controller may lift the gates once the whole gang exists, so the
    # pods are observed as created: a watch from before the Job replays each
    # pod's ADDED event, the object exactly as the API server stored it.
    since = cluster.core.list_namespaced_pod(gang_namespace).metadata.resource_version

    cluster.kubectl("apply", "-f", str(manifest))

    created: dict[str, dict[str, Any]] = {}
    stream = watch.Watch()
    for event in stream.stream(
        cluster.core.list_namespaced_pod,
        gang_namespace,
        resource_version=since,
        timeout_seconds=60,
    ):
        if event["type"] == "ADDED":
            pod = cluster.api_client.sanitize_for_serialization(event["object"])
            created[pod["metadata"]["name"]] = pod
        if len(created) == WORKERS:
            stream.stop()
    assert len(created) == WORKERS, f"kube-controller-manager created {sorted(created)}"

    gang_labels = set()
    for name, pod in created.items():
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Job", job["metadata"]["name"]), name
        assert [g["name"] for g in pod["spec"].get("schedulingGates") or []] == [GATE], name
        annotations = pod["metadata"]["annotations"]
        assert annotations["gangkeeper.io/min-member"] == str(WORKERS), name
        gang_labels.add(pod["metadata"]["labels"]["gangkeeper.io/gang"])
    assert len(gang_labels) == 1, f"the pods of one Job landed in several gangs: {gang_labels}"
