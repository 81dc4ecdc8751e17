"""`python -m bench.fuzz [--cases N] [--seed S] [--workers W] [--json FILE]`: hostile input.

Sends N hostile AdmissionReview requests (`bench.fuzz_cases`: fields deleted, retyped,
giant numbers, NaN-like strings, deep nesting, huge bodies, invalid UTF-8, wrong content
types, duplicate keys, every field of every example kind mutated) to a real
`gangkeeper serve` over TLS, from W keep-alive connections, and judges every answer:
  - 2xx: a JSON AdmissionReview for the request's uid, `allowed` a boolean, a denial
    with a non-empty message, a patch that decodes to a JSON Patch;
  - 4xx: fine (a malformed request is the client's error);
  - 5xx, a connection closed before a whole answer, or no answer within 30 s: failures.
Every 250 cases per connection, and at the end, the unmodified seed reviews are sent
again and must get exactly the answers they got before the run. Prints a Markdown table
and the first failures (with `--seed S --case I` to replay one); exits 1 on any failure.

`--url URL --ca FILE` fuzzes a server that is already running (the HTTP test does);
otherwise one is started on a free loopback port with the sample fleet and every
example as owners, and stopped at the end. Writes only to a temporary directory and
`--json`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bench.fuzz_cases import EXAMPLES, Case, Cases, Seed

FLEET = EXAMPLES / "fleet.yaml"
ANSWER_TIMEOUT = 30.0
GOOD_EVERY = 250
PROGRESS_EVERY = 10_000


class Dropped(Exception):
    """The connection ended before a whole HTTP response arrived."""


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


class Connection:
    """One keep-alive HTTP/1.1 connection over TLS that sends exactly the bytes given."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        self.address = (host, port)
        self.context = context
        self.sock: ssl.SSLSocket | None = None
        self.buffer = b""

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buffer = None, b""

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> Reply:
        if self.sock is None:
            raw = socket.create_connection(self.address, timeout=ANSWER_TIMEOUT)
            self.sock = self.context.wrap_socket(raw, server_hostname="localhost")
        head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        # The server may answer (413) before reading it all: read that answer regardless.
        with contextlib.suppress(OSError):
            self.sock.sendall(head.encode() + body)
        try:
            reply = self._read()
        except (OSError, Dropped) as exc:
            self.close()
            raise Dropped(str(exc) or type(exc).__name__) from None
        if reply.headers.get("connection", "").lower() == "close":
            self.close()
        return reply

    def _recv(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise Dropped("connection closed before a whole response")
        self.buffer += chunk

    def _read(self) -> Reply:
        while b"\r\n\r\n" not in self.buffer:
            self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._recv()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return Reply(status, headers, body)


# --- judging --------------------------------------------------------------------------


def _expected_uid(body: bytes) -> str | None:
    """The uid the server must echo, parsed as its parser would (None: not knowable)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    request = data.get("request") if isinstance(data, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else None


def judge(case: Case, reply: Reply) -> str | None:
    """What is wrong with this answer to this case (None: nothing)."""
    if 400 <= reply.status < 500:
        return None
    if not 200 <= reply.status < 300:
        return f"HTTP {reply.status}: {reply.body[:200]!r}"
    try:
        answer = json.loads(reply.body)
        response = answer["response"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {reply.status} without an AdmissionReview: {reply.body[:200]!r}"
    if (answer.get("apiVersion"), answer.get("kind")) != ("admission.k8s.io/v1",
                                                          "AdmissionReview"):
        return f"answer is not an admission.k8s.io/v1 AdmissionReview: {reply.body[:200]!r}"
    uid = _expected_uid(case.body)
    if uid is not None and response.get("uid") != uid:
        return f"answer uid {response.get('uid')!r} is not the request's {uid!r}"
    if not isinstance(response.get("allowed"), bool):
        return f"response.allowed is {response.get('allowed')!r}"
    if not response["allowed"]:
        status = response.get("status") or {}
        if not (isinstance(status.get("message"), str) and status["message"].strip()):
            return f"denied without a message: {status!r}"
    warnings = response.get("warnings", [])
    if not (isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)):
        return f"warnings are not a list of strings: {warnings!r}"
    if "patch" in response:
        try:
            ops = json.loads(base64.b64decode(response["patch"]))
            assert response.get("patchType") == "JSONPatch"
            assert isinstance(ops, list) and all("op" in o and "path" in o for o in ops)
        except Exception:
            return f"patch is not a base64 JSON Patch: {response['patch'][:80]!r}"
    return None


# --- the run --------------------------------------------------------------------------


@dataclass
class Failure:
    index: int
    strategy: str
    endpoint: str
    what: str
    problem: str

    def line(self, seed: int) -> str:
        return (f"case {self.index} ({self.strategy}, /{self.endpoint}, {self.what}): "
                f"{self.problem}  [replay: python -m bench.fuzz --seed {seed} "
                f"--case {self.index}]")


@dataclass
class Tally:
    statuses: Counter[str] = field(default_factory=Counter)
    strategies: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    dropped: int = 0
    server_errors: int = 0
    bad_answers: int = 0
    good_checks: int = 0
    good_wrong: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _good_answers(conn: Connection, goods: Sequence[Seed]) -> list[bytes]:
    out = []
    for seed in goods:
        body = json.dumps(seed.review, separators=(",", ":")).encode()
        out.append(conn.post(f"/{seed.endpoint}", body,
                             {"content-type": "application/json"}).body)
    return out


@dataclass
class _Run:
    """What the connections of one run share."""

    cases: Cases
    indexes: Iterator[int]
    target: tuple[str, int]
    context: ssl.SSLContext
    goods: Sequence[Seed]
    baseline: list[bytes]
    tally: Tally
    lock: threading.Lock = field(default_factory=threading.Lock)

    def worker(self) -> None:
        conn = Connection(*self.target, self.context)
        tally = self.tally
        done = 0
        try:
            while True:
                with self.lock:
                    index = next(self.indexes, None)
                if index is None:
                    break
                case = self.cases.case(index)
                try:
                    reply = conn.post(f"/{case.endpoint}", case.body, case.headers)
                    problem = judge(case, reply)
                    status = str(reply.status)
                except Dropped as exc:
                    problem, status = f"dropped connection: {exc}", "dropped"
                with tally.lock:
                    tally.statuses[status] += 1
                    tally.strategies[case.strategy] += 1
                    if problem is not None:
                        tally.dropped += status == "dropped"
                        tally.server_errors += status.startswith("5")
                        tally.bad_answers += status.startswith("2")
                        tally.failures.append(Failure(index, case.strategy, case.endpoint,
                                                      case.what, problem))
                done += 1
                if done % GOOD_EVERY == 0:
                    _check_good(conn, self.goods, self.baseline, tally, after=index)
                if index % PROGRESS_EVERY == PROGRESS_EVERY - 1:
                    print(f"[fuzz {time.strftime('%H:%M:%S')}] {index + 1} cases, "
                          f"{len(tally.failures)} failures", file=sys.stderr, flush=True)
        finally:
            conn.close()


def _check_good(conn: Connection, goods: Sequence[Seed], baseline: list[bytes],
                tally: Tally, after: int = -1) -> None:
    try:
        again = _good_answers(conn, goods)
        problem = next((f"answer changed: {a[:300]!r}, was {b[:300]!r}"
                        for a, b in zip(again, baseline, strict=True) if a != b), None)
    except Dropped as exc:
        problem = f"dropped connection: {exc}"
    with tally.lock:
        tally.good_checks += 1
        if problem is not None:
            tally.good_wrong += 1
            tally.failures.append(Failure(after, "good-check", "mutate+validate",
                                          "the unmodified seed reviews", problem))


def run(cases: int, *, seed: int, url: str, ca: Path, workers: int = 2,
        seeds: Sequence[Seed] | None = None, start: int = 0) -> dict[str, Any]:
    """Fuzz the server at `url` with cases start..start+cases; one summary row."""
    generator = Cases(seed, seeds)
    parts = urlsplit(url)
    target = (parts.hostname or "127.0.0.1", parts.port or 443)
    context = ssl.create_default_context(cafile=str(ca))
    goods = [next(s for s in generator.seeds if s.endpoint == e) for e in ("mutate", "validate")]
    probe = Connection(*target, context)
    baseline = _good_answers(probe, goods)
    # Idle through the run, it would outlive the server's idle timeout (which closes it,
    # as it should): the last check opens its own connection.
    probe.close()
    tally = Tally()
    shared = _Run(generator, iter(range(start, start + cases)), target, context, goods,
                  baseline, tally)
    started = time.perf_counter()
    threads = [threading.Thread(target=shared.worker, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    _check_good(probe, goods, baseline, tally)
    probe.close()
    return {
        "cases": sum(tally.strategies.values()),
        "seed": seed,
        "workers": workers,
        "seconds": round(seconds, 1),
        "cases_per_s": round(cases / seconds, 1) if seconds else 0.0,
        "status": dict(sorted(tally.statuses.items())),
        "by_strategy": dict(sorted(tally.strategies.items())),
        "server_errors": tally.server_errors,
        "dropped": tally.dropped,
        "bad_answers": tally.bad_answers,
        "good_checks": tally.good_checks,
        "good_answer_changed": tally.good_wrong,
        "failures": [f.line(seed) for f in sorted(tally.failures, key=lambda f: f.index)[:50]],
        "failure_count": len(tally.failures),
    }


# --- a server of its own ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(work: Path, *extra: str) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """`gangkeeper serve` on a free loopback port with the examples as owners."""
    owners = work / "owners.yaml"
    docs = [d for p in sorted(EXAMPLES.glob("*.yaml")) if p.name != "fleet.yaml"
            for d in yaml.safe_load_all(p.read_text()) if d]
    owners.write_text(yaml.safe_dump_all(docs))
    port = _free_port()
    log = (work / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--nodes", str(FLEET),
         "--owners", str(owners), "--host", "127.0.0.1", "--port", str(port),
         "--cert-dir", str(work / "certs"), "--log-level", "error", *extra],
        stdout=log, stderr=subprocess.STDOUT, cwd=work,
    )
    ca = work / "certs" / "ca.crt"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gangkeeper serve exited; see {work / 'serve.log'}")
            try:
                if ca.is_file():
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gangkeeper serve did not start listening within 60 s")
            time.sleep(0.2)
        yield f"https://127.0.0.1:{port}", ca, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _peak_rss_mb(pid: int) -> float | None:
    status = Path(f"/proc/{pid}/status")
    match = re.search(r"VmHWM:\s+(\d+) kB", status.read_text()) if status.exists() else None
    return round(int(match.group(1)) / 1024, 1) if match else None


def markdown(row: dict[str, Any]) -> str:
    statuses = ", ".join(f"{k}: {v}" for k, v in row["status"].items())
    lines = [
        "| cases | seconds | cases/s | answers by status | 5xx | dropped | bad 2xx | "
        "good review answered as before |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {row['cases']} | {row['seconds']} | {row['cases_per_s']} | {statuses} | "
        f"{row['server_errors']} | {row['dropped']} | {row['bad_answers']} | "
        f"{row['good_checks'] - row['good_answer_changed']}/{row['good_checks']} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--case", type=int, help="replay only this case (prints it)")
    parser.add_argument("--workers", type=int, default=2, help="connections in parallel")
    parser.add_argument("--url", help="fuzz this running server instead of starting one")
    parser.add_argument("--ca", type=Path, help="the CA that signed --url's certificate")
    parser.add_argument("--json", type=Path, help="write the summary row here")
    args = parser.parse_args(argv)
    start, count = (args.case, 1) if args.case is not None else (0, args.cases)
    if args.case is not None:
        case = Cases(args.seed).case(args.case)
        print(f"case {case.index}: {case.strategy} /{case.endpoint} {case.what} "
              f"({len(case.body)} bytes) headers={case.headers}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gangkeeper-fuzz-") as tmp:
        if args.url:
            if args.ca is None:
                parser.error("--url needs --ca")
            row = run(count, seed=args.seed, url=args.url, ca=args.ca, workers=args.workers,
                      start=start)
        else:
            with served(Path(tmp)) as (url, ca, process):
                row = run(count, seed=args.seed, url=url, ca=ca, workers=args.workers,
                          start=start)
                row["server_alive"] = process.poll() is None
                row["server_peak_rss_mb"] = _peak_rss_mb(process.pid)
    print(markdown(row))
    for line in row["failures"][:20]:
        print(line)
    if args.json:
        args.json.write_text(json.dumps(row, indent=2))
    ok = row["failure_count"] == 0 and row["good_answer_changed"] == 0
    return 0 if ok and row.get("server_alive", True) else 1


if __name__ == "__main__":
    sys.exit(main())
