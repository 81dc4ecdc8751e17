"""`python -m bench.webhook [--quick]`: admission throughput and latency over TLS.

One `gangkeeper serve` process (one uvicorn worker, TLS, JSON request logs to a file,
the sample fleet) answers a typical 8-GPU training pod's AdmissionReview (~6 KB: a
PyTorchJob worker with env, volumes, tolerations, affinity; its owner is known, so the
pod is recognised, checked and patched). Load comes from separate processes. Three
endpoints are measured side by side in the same run:
  - `/noop`: the floor — same server, TLS, HTTP parsing, body read, JSON parse, metrics
    and log line, but no policy (enabled only by `--enable-noop`, which this sets);
  - `/mutate` and `/validate`.
Two figures per endpoint:
  - throughput: closed loop, `wrk` when installed (else a Python load generator), as a
    ratio to the floor's throughput (target ≥ 70 %): ten short rounds (three with
    --quick), each measuring the three endpoints back to back in a rotating order; the
    ratio is taken within each round and the median reported with its range, so a slow
    spell of this shared machine cannot land on one endpoint only;
  - latency at a fixed 500 requests/s: an open-loop Python generator in its own process;
    latency is measured from each request's scheduled send time, so a stall is not hidden
    by the generator waiting (target p99 ≤ 10 ms).
`run(quick)` returns one row per endpoint; the command prints a Markdown table.

Starts and stops its own server and load processes and writes only to a temporary
directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "examples" / "fleet.yaml"
ENDPOINTS = ("noop", "mutate", "validate")
FIXED_RATE = 500.0
CONNECTIONS = 8

# As the owner cache holds it in a cluster: an API object, so it has a resourceVersion
# (an object without one, e.g. hand-written, is re-read by content on every request).
OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "llama-8b-sft", "namespace": "research", "uid": "5f1c1d7e-0b52-4c53",
                 "resourceVersion": "48213"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{
                    "name": "pytorch", "image": "ghcr.io/example/llama-train:2.5",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }]}},
            }
        }
    },
}


def typical_pod() -> dict[str, Any]:
    """A PyTorchJob worker pod as the training operator creates it (about 6 KB as JSON)."""
    env: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in [
        ("MASTER_ADDR", "llama-8b-sft-worker-0"), ("MASTER_PORT", "23456"),
        ("WORLD_SIZE", "2"), ("RANK", "1"), ("PYTHONUNBUFFERED", "1"),
        ("NCCL_DEBUG", "WARN"), ("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_DISABLE", "0"),
        ("HF_HOME", "/cache/huggingface"), ("TRANSFORMERS_CACHE", "/cache/huggingface/hub"),
        ("WANDB_PROJECT", "llama-8b-sft"), ("WANDB_MODE", "offline"),
        ("OMP_NUM_THREADS", "12"), ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
    ]]
    env += [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "llama-checkpoints"}},
        {"name": "datasets", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {"name": "hf-cache", "persistentVolumeClaim": {"claimName": "hf-cache"}},
        {"name": "config", "configMap": {"name": "llama-8b-sft-config"}},
        {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt",
                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}},
    ]
    mounts = [{"name": v["name"], "mountPath": f"/mnt/{v['name']}"} for v in volumes]
    container = {
        "name": "pytorch",
        "image": "ghcr.io/example/llama-train:2.5",
        "imagePullPolicy": "IfNotPresent",
        "command": ["torchrun"],
        "args": ["--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d",
                 "--rdzv-endpoint=llama-8b-sft-worker-0:23456", "/workspace/train.py",
                 "--model=meta-llama/Llama-3.1-8B", "--dataset=/mnt/datasets/sft-v3",
                 "--output=/mnt/checkpoints/llama-8b-sft", "--bf16", "--gradient-checkpointing",
                 "--per-device-batch-size=4", "--learning-rate=2e-5", "--epochs=3"],
        "env": env,
        "ports": [{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
        "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "900Gi"},
                      "requests": {"cpu": "90", "memory": "900Gi", "nvidia.com/gpu": "8"}},
        "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llama-8b-sft-worker-1",
            "namespace": "research",
            "labels": {
                "training.kubeflow.org/job-name": "llama-8b-sft",
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-index": "1",
                "training.kubeflow.org/replica-type": "worker",
                "app.kubernetes.io/part-of": "llm-finetuning",
                "team": "research-nlp",
            },
            "annotations": {"sidecar.istio.io/inject": "false",
                            "kubectl.kubernetes.io/default-container": "pytorch"},
            "ownerReferences": [{
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama-8b-sft",
                "uid": "5f1c1d7e-0b52-4c53", "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": {
            "containers": [container],
            "initContainers": [{"name": "fetch-tokenizer", "image": "ghcr.io/example/fetch:1",
                                "command": ["sh", "-c", "cp -r /tokenizer /mnt/hf-cache/"],
                                "volumeMounts": mounts[3:4]}],
            "volumes": volumes,
            "restartPolicy": "OnFailure",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "training",
            "priorityClassName": "training-high",
            "securityContext": {"fsGroup": 1000},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{
                    "key": "nvidia.com/gpu.product", "operator": "In",
                    "values": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"]}]}]}}},
        },
    }


def typical_review() -> bytes:
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "b1f0a7c2-6a3e-4d1e-9f3a-2c8e5d7b9a10",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "research",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator",
                         "uid": "0c3a8a8e-6f0b-4b7c-8d0b-2b4f1f0b7e1a",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kubeflow",
                                    "system:authenticated"]},
            "object": typical_pod(),
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }).encode()


# --- the server -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    def __init__(self, work: Path) -> None:
        self.port = _free_port()
        owners = work / "owners.yaml"
        owners.write_text(yaml.safe_dump(OWNER))
        self.log = (work / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--nodes", str(FLEET),
             "--owners", str(owners), "--host", "127.0.0.1", "--port", str(self.port),
             "--cert-dir", str(work / "certs"), "--enable-noop"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=work,
        )
        self.ca = work / "certs" / "ca.crt"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gangkeeper serve exited; see {work / 'serve.log'}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gangkeeper serve did not start listening within 60 s")

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used (Linux /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


# --- load generators (run in their own process: `--load ...`) ---------------------------


async def _connection(port: int, context: ssl.SSLContext) -> tuple[Any, Any]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                         server_hostname="localhost")


async def _exchange(reader: Any, writer: Any, request: bytes) -> int:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
    await reader.readexactly(length)
    return status


def _request(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def _open_loop(port: int, ca: str, path: str, body: bytes, *, rate: float,
                     seconds: float) -> dict[str, Any]:
    """Send at a fixed rate on a pool of connections; latency from the scheduled time."""
    context = ssl.create_default_context(cafile=ca)
    request = _request(path, body)
    pool: asyncio.Queue[tuple[Any, Any]] = asyncio.Queue()
    for _ in range(CONNECTIONS * 2):
        pool.put_nowait(await _connection(port, context))
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.2

    async def one(scheduled: float) -> None:
        nonlocal errors
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        conn = await pool.get()
        try:
            status = await _exchange(*conn, request)
            if status != 200:
                errors += 1
            latencies.append(loop.time() - scheduled)
            pool.put_nowait(conn)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            errors += 1
            pool.put_nowait(await _connection(port, context))

    total = int(rate * seconds)
    await asyncio.gather(*(one(start + i / rate) for i in range(total)))
    elapsed = loop.time() - start
    latencies.sort()
    return {
        "sent": total,
        "errors": errors,
        "achieved_rps": len(latencies) / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


async def _closed_loop(port: int, ca: str, path: str, body: bytes,
                       seconds: float) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=ca)
    request = _request(path, body)
    done = 0
    errors = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def worker() -> None:
        nonlocal done, errors
        conn = await _connection(port, context)
        while loop.time() < deadline:
            if await _exchange(*conn, request) == 200:
                done += 1
            else:
                errors += 1

    start = loop.time()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    return {"rps": done / (loop.time() - start), "requests": done + errors, "errors": errors}


def _python_load(args: list[str]) -> dict[str, Any]:
    """Run a Python load generator in a separate process; its JSON result."""
    out = subprocess.run([sys.executable, "-m", "bench.webhook", "--load", *args],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _wrk(port: int, path: str, body_file: Path, seconds: float) -> dict[str, Any]:
    script = body_file.with_suffix(".lua")
    script.write_text(
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n'
    )
    out = subprocess.run(
        ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s", "--latency",
         "-s", str(script), f"https://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return {"rps": rps, "requests": total, "errors": int(bad.group(1)) if bad else 0}


# --- the benchmark ------------------------------------------------------------------------


def handler_cpu_us(rounds: int = 15, per_round: int = 100) -> dict[str, float]:
    """CPU time of the admission handler alone (parse, policy, patch, answer), in process.

    Not a substitute for the HTTP figures; it splits them: what the policy costs per
    request versus the HTTP/TLS stack, robust to other load on the machine (minimum of
    interleaved rounds of process CPU time).
    """
    from gangkeeper.policies.admission.decision import Memos
    from gangkeeper.policies.settings.config import Config
    from gangkeeper.webhook.files.manifests import load_nodes
    from gangkeeper.webhook.server import admission
    from gangkeeper.webhook.server.cluster_view import StaticClusterView

    config = Config()
    view = StaticClusterView(load_nodes(FLEET), config, [OWNER])
    policy = admission.Policy(
        capacity=view.capacity, lookup=view.lookup, config=config, memos=Memos()
    )
    body = typical_review()
    best = dict.fromkeys(ENDPOINTS, float("inf"))
    for _ in range(rounds):
        for endpoint in ENDPOINTS:
            started = time.process_time()
            for _ in range(per_round):
                admission.answer(endpoint, admission.parse_review(body), policy)  # type: ignore[arg-type]
            best[endpoint] = min(best[endpoint],
                                 1e6 * (time.process_time() - started) / per_round)
    return best


def run(quick: bool) -> list[dict[str, Any]]:
    # Throughput: many short closed-loop rounds, each measuring every endpoint once in
    # a rotating order, so a slow spell of this shared machine hits one round's three
    # endpoints alike; the ratio to the floor is taken per round, then the median.
    rounds, seconds = (3, 2.0) if quick else (10, 3.0)
    latency_rounds, latency_seconds = (1, 3.0) if quick else (2, 10.0)
    with tempfile.TemporaryDirectory(prefix="gk-bench-webhook-") as tmp:
        work = Path(tmp)
        body = typical_review()
        body_file = work / "review.json"
        body_file.write_bytes(body)
        server = ServerProcess(work)
        try:
            use_wrk = shutil.which("wrk") is not None
            throughput: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
            cpu_us: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
            fixed: dict[str, list[dict[str, Any]]] = {e: [] for e in ENDPOINTS}
            errors = dict.fromkeys(ENDPOINTS, 0)
            # Warm-up: imports, caches, TLS session setup.
            _python_load(["closed", str(server.port), str(server.ca), "/mutate",
                          str(body_file), "1"])
            for index in range(rounds):
                shift = index % len(ENDPOINTS)
                for endpoint in ENDPOINTS[shift:] + ENDPOINTS[:shift]:
                    path = f"/{endpoint}"
                    cpu_before = server.cpu_seconds()
                    if use_wrk:
                        result = _wrk(server.port, path, body_file, seconds)
                    else:
                        result = _python_load(["closed", str(server.port), str(server.ca), path,
                                               str(body_file), str(seconds)])
                    throughput[endpoint].append(result["rps"])
                    cpu_us[endpoint].append(
                        1e6 * (server.cpu_seconds() - cpu_before) / max(1, result["requests"])
                    )
                    errors[endpoint] += result["errors"]
            for _ in range(latency_rounds):
                for endpoint in ENDPOINTS:
                    result = _python_load(["open", str(server.port), str(server.ca),
                                           f"/{endpoint}", str(body_file), str(latency_seconds)])
                    fixed[endpoint].append(result)
                    errors[endpoint] += result["errors"]
        finally:
            server.stop()
    handler = handler_cpu_us(rounds=5 if quick else 15)
    rows = []
    for endpoint in ENDPOINTS:
        runs = fixed[endpoint]
        pairs = zip(throughput[endpoint], throughput["noop"], strict=True)
        ratios = [rps / floor for rps, floor in pairs]
        cpu_pairs = zip(cpu_us[endpoint], cpu_us["noop"], strict=True)
        cpu_ratios = [floor / cpu for cpu, floor in cpu_pairs]
        rows.append({
            "endpoint": f"/{endpoint}",
            "body_bytes": len(body),
            "load": "wrk" if use_wrk else "python",
            "rounds": rounds,
            "throughput_rps": round(statistics.median(throughput[endpoint]), 1),
            "ratio_to_floor": round(statistics.median(ratios), 3),
            "ratio_min": round(min(ratios), 3),
            "ratio_max": round(max(ratios), 3),
            "server_cpu_us_per_request": round(statistics.median(cpu_us[endpoint])),
            "cpu_ratio_to_floor": round(statistics.median(cpu_ratios), 3),
            "handler_cpu_us": round(handler[endpoint]),
            "rate_rps": FIXED_RATE,
            "achieved_rps": round(statistics.median(r["achieved_rps"] for r in runs), 1),
            "p50_ms": round(statistics.median(r["p50_ms"] for r in runs), 2),
            "p99_ms": round(max(r["p99_ms"] for r in runs), 2),
            "errors": errors[endpoint],
        })
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| endpoint | throughput (req/s) | vs floor (median; range over rounds) | "
            "server CPU per request (µs) | vs floor (CPU) | handler alone (CPU µs) | "
            "p50 @ 500 rps (ms) | p99 @ 500 rps (ms) | achieved rps | errors |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    return head + "".join(
        f"| `{r['endpoint']}` | {r['throughput_rps']:.0f} | {100 * r['ratio_to_floor']:.0f} % "
        f"({100 * r['ratio_min']:.0f} to {100 * r['ratio_max']:.0f} %) "
        f"| {r['server_cpu_us_per_request']} | {100 * r['cpu_ratio_to_floor']:.0f} % "
        f"| {r['handler_cpu_us']} "
        f"| {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['achieved_rps']:.0f} | {r['errors']} |\n"
        for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="3 throughput rounds of 2 s and one 3 s latency run per endpoint")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    parser.add_argument("--load", nargs=6, help=argparse.SUPPRESS,
                        metavar=("MODE", "PORT", "CA", "PATH", "BODY", "SECONDS"))
    args = parser.parse_args(argv)
    if args.load:
        mode, port, ca, path, body_file, secs = args.load
        body = Path(body_file).read_bytes()
        if mode == "open":
            result = asyncio.run(_open_loop(int(port), ca, path, body, rate=FIXED_RATE,
                                            seconds=float(secs)))
        else:
            result = asyncio.run(_closed_loop(int(port), ca, path, body, float(secs)))
        print(json.dumps(result))
        return 0
    rows = run(args.quick)
    print(f"AdmissionReview body: {rows[0]['body_bytes']} bytes; load: {rows[0]['load']}; "
          f"{os.cpu_count()} CPUs\n")
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
