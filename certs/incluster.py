"""In-cluster self-managed certificates: a Secret, files for the server, and caBundle injection.

`SelfManagedCerts.reconcile()` (idempotent; the server calls it at start and then
periodically, on every replica):
1. reads the Secret holding the CA bundle, the CA key and the serving certificate; issues or
   renews what is missing or due (`issue.renew`: numbers and overlap rules live there) and
   writes it back with the read resourceVersion. On a conflict another replica wrote first:
   re-read and judge its material instead, so all replicas converge on one CA;
2. writes `ca.crt`, `tls.crt`, `tls.key` into `cert_dir` when they differ (the server
   reloads them by content hash); the CA key never leaves the Secret;
3. puts the CA bundle into `clientConfig.caBundle` of every webhook entry of gangkeeper's
   own webhook configurations where it differs, which also re-injects it after someone
   removed it (e.g. a `kubectl apply` of the manifests, which ship it empty).

May talk to the API server (Secrets in its namespace, its two webhook configurations) and
write files in `cert_dir`; nothing else. The few API calls sit behind `KubeCalls` so unit
tests can use a small in-memory fake; end-to-end tests use a real API server.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from gangkeeper.policies.errors import CertSyncError as CertSyncError
from gangkeeper.policies.errors import CertWriteConflict as Conflict
from gangkeeper.policies.names import SECRET_NAME, SERVICE_NAME, WEBHOOK_CONFIGURATIONS

from .issue import Material, renew, service_dns_names
from .local import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, write_material

log = logging.getLogger(__name__)

WebhookKind = Literal["mutating", "validating"]
WEBHOOK_KINDS: tuple[WebhookKind, ...] = ("mutating", "validating")
SECRET_KEYS = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
#: Writers racing on the Secret converge after one re-read; a few tries cover bursts.
MAX_CONFLICT_RETRIES = 5


class KubeCalls(Protocol):
    """The API calls reconcile() makes, on plain dicts (camelCase, as on the wire)."""

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None: ...

    def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> None: ...

    def read_webhook_configuration(self, kind: WebhookKind, name: str) -> dict[str, Any] | None: ...

    def patch_webhook_configuration(
        self, kind: WebhookKind, name: str, patch: list[dict[str, Any]]
    ) -> None: ...


class ClientCalls:
    """`KubeCalls` over the kubernetes python client.

    Reads bypass the client's models (`_preload_content=False`, then JSON) so the dicts
    are exactly what the API server sent, caBundle included.
    """

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._admission = client.AdmissionregistrationV1Api(api_client)

    def _read(self, call: Callable[..., Any], *args: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            response = call(*args, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data: dict[str, Any] = json.loads(response.data)
        return data

    def _write(
        self, call: Callable[..., Any], *args: Any, retry_on: tuple[int, ...] = (409,), **kw: Any
    ) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            call(*args, _preload_content=False, **kw)
        except ApiException as exc:
            if exc.status in retry_on:
                raise Conflict(f"{exc.status} {exc.reason}") from exc
            raise

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(self._core.read_namespaced_secret, name, namespace)

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self._write(self._core.create_namespaced_secret, namespace, body)

    def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self._write(self._core.replace_namespaced_secret, name, namespace, body)

    def read_webhook_configuration(self, kind: WebhookKind, name: str) -> dict[str, Any] | None:
        if kind == "mutating":
            return self._read(self._admission.read_mutating_webhook_configuration, name)
        return self._read(self._admission.read_validating_webhook_configuration, name)

    def patch_webhook_configuration(
        self, kind: WebhookKind, name: str, patch: list[dict[str, Any]]
    ) -> None:
        call = (
            self._admission.patch_mutating_webhook_configuration
            if kind == "mutating"
            else self._admission.patch_validating_webhook_configuration
        )
        # 422: a `test` op failed because the entries moved; same remedy as a conflict.
        self._write(
            call, name, patch, retry_on=(409, 422), _content_type="application/json-patch+json"
        )


def material_from_secret(secret: dict[str, Any] | None) -> Material | None:
    """The Secret's material, or None when it is absent or incomplete (e.g. shipped empty)."""
    if secret is None:
        return None
    data = secret.get("data") or {}
    if not all(isinstance(data.get(k), str) and data[k] for k in SECRET_KEYS):
        return None
    try:
        ca, ca_key, cert, key = (base64.b64decode(data[k], validate=True) for k in SECRET_KEYS)
    except ValueError:
        return None
    return Material(ca, ca_key, cert, key)


def _secret_data(material: Material) -> dict[str, str]:
    raw = dict(
        zip(
            SECRET_KEYS,
            (material.ca_bundle, material.ca_key, material.cert, material.key),
            strict=True,
        )
    )
    return {k: base64.b64encode(v).decode() for k, v in raw.items()}


class SelfManagedCerts:
    """Keeps gangkeeper's CA and serving certificate in a Secret and the caBundle injected."""

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        secret_name: str = SECRET_NAME,
        service_name: str = SERVICE_NAME,
        webhook_names: Sequence[str] = WEBHOOK_CONFIGURATIONS,
        cert_dir: Path,
        calls: KubeCalls | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`calls` and `clock` replace the API client and the time in unit tests."""
        self.namespace = namespace
        self.secret_name = secret_name
        self.dns_names = service_dns_names(service_name, namespace)
        self.webhook_names = tuple(webhook_names)
        self.cert_dir = Path(cert_dir)
        self._calls: KubeCalls = calls if calls is not None else ClientCalls(api_client)
        self._clock = clock

    def reconcile(self) -> None:
        """Settle the Secret, write the files, inject the caBundle (idempotent; periodic).

        Raises CertSyncError after repeated conflicts and lets API errors (403, network)
        through, so the caller's loop logs them and tries again on its next tick.
        """
        material = self._settle_secret()
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        write_material(self.cert_dir, material, with_ca_key=False)
        self._inject(base64.b64encode(material.ca_bundle).decode())

    def _settle_secret(self) -> Material:
        where = f"Secret {self.namespace}/{self.secret_name}"
        for _ in range(MAX_CONFLICT_RETRIES):
            secret = self._calls.read_secret(self.namespace, self.secret_name)
            current = material_from_secret(secret)
            wanted = renew(current, self.dns_names, (), self._clock())
            if wanted is current:
                return wanted
            try:
                if secret is None:
                    body = {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": self.secret_name, "namespace": self.namespace},
                        "type": "Opaque",
                        "data": _secret_data(wanted),
                    }
                    self._calls.create_secret(self.namespace, body)
                else:
                    # Replace the object as read: its resourceVersion makes a concurrent
                    # write by another replica a Conflict instead of a lost update.
                    body = dict(secret)
                    body["data"] = {**(secret.get("data") or {}), **_secret_data(wanted)}
                    self._calls.replace_secret(self.namespace, self.secret_name, body)
            except Conflict:
                log.info("%s changed while renewing; re-reading", where)
                continue
            log.info("%s: issued or renewed the webhook certificate", where)
            return wanted
        raise CertSyncError(f"{where}: {MAX_CONFLICT_RETRIES} conflicting writes in a row")

    def _inject(self, ca_bundle: str) -> None:
        for name in self.webhook_names:
            for kind in WEBHOOK_KINDS:
                config = self._calls.read_webhook_configuration(kind, name)
                if config is None:
                    continue
                patch: list[dict[str, Any]] = []
                for i, hook in enumerate(config.get("webhooks") or []):
                    if (hook.get("clientConfig") or {}).get("caBundle") == ca_bundle:
                        continue
                    # The test op pins the entry by name: if the list was reordered since
                    # the read, the whole patch fails instead of touching another entry.
                    patch.append(
                        {"op": "test", "path": f"/webhooks/{i}/name", "value": hook["name"]}
                    )
                    if "clientConfig" not in hook:
                        patch.append(
                            {"op": "add", "path": f"/webhooks/{i}/clientConfig", "value": {}}
                        )
                    patch.append(
                        {
                            "op": "add",
                            "path": f"/webhooks/{i}/clientConfig/caBundle",
                            "value": ca_bundle,
                        }
                    )
                if patch:
                    try:
                        self._calls.patch_webhook_configuration(kind, name, patch)
                    except Conflict:
                        log.info("%s webhook configuration %s changed; next reconcile", kind, name)
                        continue
                    log.info("injected caBundle into %s webhook configuration %s", kind, name)
