"""The built image as the sandbox's webhook server and gang controller: the seed story
through `podman run IMAGE serve`.

The sandbox's own `gangkeeper serve` is stopped and the image (`deploy/image/build.sh`)
takes its place: host network, the same port, serving certificate and config, so the
API server's webhooks keep their URL and caBundle. The container runs as the image's
own user (65532) on a read-only root filesystem, so it gets copies it may read: the
certificate directory, the config and gangkeeper's kubeconfig with its client
certificate inlined. Then an Indexed Job of 8 x 1 GPU on 2 nodes x 4 GPUs with 3
taken: no member binds while 5 GPUs are free; once the blocker is gone all 8 bind and
become Ready. The sandbox's own server is started again afterwards, whatever happened.
"""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.cluster import POOL_LABEL, unique
from builders.controllers import gpu_template, is_gated, is_ready, recording, run_blocker
from builders.image import built_image, podman

from gangkeeper.webhook.sandbox.registration import webhook_reached
from gangkeeper.webhook.sandbox.sandbox import OPTED_IN_NAMESPACE

#: The image's user (the Dockerfile's numeric UID and GID).
IMAGE_USER = 65532
#: Long enough for kube-scheduler to have bound any pod it could (it binds in ms).
SETTLE_SECONDS = 3.0


def _inlined(kubeconfig: Path) -> dict[str, Any]:
    """The kubeconfig with every file it names (CA, client certificate and key) inlined,
    so it reads nothing of the host's filesystem."""
    data = yaml.safe_load(kubeconfig.read_text())
    sections = [(c["cluster"], ("certificate-authority",)) for c in data.get("clusters", [])]
    sections += [(u["user"], ("client-certificate", "client-key")) for u in data.get("users", [])]
    for section, keys in sections:
        for key in keys:
            if key in section:
                raw = Path(section.pop(key)).read_bytes()
                section[f"{key}-data"] = base64.b64encode(raw).decode()
    return data


def _argument(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.fixture
def image_serving(cluster: Any, tmp_path: Path) -> Iterator[str]:
    """The image serving in place of the sandbox's gangkeeper; yields the container."""
    image = built_image()
    sandbox = cluster.sandbox
    if sandbox is None:
        pytest.skip("replacing gangkeeper's server needs the sandbox")
    argv = sandbox.state()["gangkeeper_argv"]
    work = tmp_path / "gangkeeper"
    shutil.copytree(_argument(argv, "--cert-dir"), work / "certs")
    shutil.copy(_argument(argv, "--config"), work / "config.yaml")
    kubeconfig = _inlined(Path(_argument(argv, "--kubeconfig")))
    (work / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    for path in (work, *work.rglob("*")):
        shutil.chown(path, IMAGE_USER, IMAGE_USER)
    name = unique("gangkeeper-image")
    cluster.gangkeeper_stop()
    try:
        started = podman(
            "run", "-d", "--rm", "--name", name, "--network=host", "--read-only",
            "-v", f"{work}:/var/run/gangkeeper", image,
            "serve", "--kubeconfig", "/var/run/gangkeeper/kubeconfig",
            "--host", "127.0.0.1", "--port", _argument(argv, "--port"),
            "--cert-dir", "/var/run/gangkeeper/certs",
            "--config", "/var/run/gangkeeper/config.yaml",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        try:
            cluster.wait_for(lambda: webhook_reached(sandbox.cli, OPTED_IN_NAMESPACE),
                             timeout=90, message="the API server reaches the image's server")
            yield name
        finally:
            logs = podman("logs", name).stdout
            podman("rm", "-f", name)
            print(logs[-4000:])
    finally:
        cluster.gangkeeper_start()


def _pods(cluster: Any, namespace: str, selector: str) -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def test_the_image_gates_eight_workers_on_five_free_gpus_and_releases_them_whole(
    cluster: Any, gang_namespace: str, plain_namespace: str, image_serving: str
) -> None:
    assert not cluster.sandbox.processes.alive("gangkeeper"), "the sandbox's own server runs"
    pool = unique("image-seed")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    blocker = run_blocker(cluster, plain_namespace, pool, 3)
    name = unique("image-seed")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": gang_namespace},
        "spec": {"completionMode": "Indexed", "completions": 8, "parallelism": 8,
                 "backoffLimit": 0, "template": gpu_template(pool, 1)},
    }
    selector = f"batch.kubernetes.io/job-name={name}"
    with recording(cluster, gang_namespace, selector) as seen:
        cluster.batch.create_namespaced_job(gang_namespace, job)
        cluster.wait_for(lambda: len(_pods(cluster, gang_namespace, selector)) == 8,
                         timeout=60, message="the Job controller creating 8 pods")
        time.sleep(SETTLE_SECONDS)
        pods = _pods(cluster, gang_namespace, selector)
        assert all(is_gated(p) for p in pods), [p.metadata.name for p in pods if not is_gated(p)]
        assert not [p for p in pods if p.spec.node_name], "a member bound while 5 GPUs were free"

        cluster.core.delete_namespaced_pod(blocker, plain_namespace)
        cluster.wait_for(
            lambda: sum(is_ready(p) for p in _pods(cluster, gang_namespace, selector)) == 8,
            timeout=120,
            message="all 8 members Running and Ready, released by the image's controller",
        )
        assert all(seen.gated_at_creation().values()), seen.gated_at_creation()
    done = podman("logs", image_serving)
    logs = done.stdout + done.stderr
    # The image's controller released the gang (the sandbox's own server was stopped).
    released = [line for line in logs.splitlines() if "released gang" in line and name in line]
    assert released, logs[-2000:]
