"""Every exception gangkeeper raises, in one place, drawn as the tree it is.

    GangkeeperError              base: catch this to handle any gangkeeper failure
    ├── PolicyError              the policy core cannot use its input
    │   ├── InvalidObject        an object (pod, workload, node) cannot be read;
    │   │                        names the field path, e.g. spec.containers[0]...
    │   └── InvalidConfig        the gangkeeper config is wrong; names the key
    ├── NotAGang                 explain's target is no gang gangkeeper knows (LookupError)
    ├── DuplicateRecognizer      a recogniser registered twice (ValueError)
    ├── ConfigFileError          the config file cannot be read; names the file
    ├── ManifestError            a manifest file cannot be read; names file and document
    ├── UsageError               a bad `serve` flag or file: exit code 2, no traceback
    ├── ClusterStateError        a CLI command could not read the cluster; says which part
    ├── KubeconfigError          no usable cluster configuration; says what was tried
    ├── ApiError                 the API server answered an error (`.status`; 0: unreachable)
    │   ├── Forbidden            403
    │   ├── NotFound             404
    │   ├── Conflict             409: changed since read, or already exists
    │   ├── Gone                 410: resourceVersion or continue token too old
    │   ├── Invalid              422: the object (or a JSON Patch test) was refused
    │   ├── TooManyRequests      429: not now (an Eviction a PodDisruptionBudget refuses)
    │   └── Timeout              504, or the client gave up waiting (`.status` 0)
    ├── BadReview                the body is no usable AdmissionReview (`.status`: 4xx)
    ├── OwnerNotCached           an owner the watch caches do not hold yet: the admission
    │                            is decided again off the event loop, fetching it
    ├── CertificateUnavailable   the serving certificate or key cannot be loaded
    ├── CertificateError         PEM material cannot be read; names its source (ValueError)
    ├── CertWriteConflict        the certificate Secret or a webhook configuration moved
    │                            under a write: re-read and decide again
    ├── CertSyncError            reconcile() could not settle the Secret (RuntimeError)
    ├── SandboxError             the sandbox could not start or drive a component
    │                            (RuntimeError)
    └── BinariesMissing          the sandbox's control plane is not built (RuntimeError)

A builtin named in parentheses is a second base, kept because callers catch it.
`ApiError(status, ...)` returns the subclass for that status, so every raise site
and test fake builds the right one and callers write `except NotFound`.
The modules that raise these re-export them under the names they always had
(`gangkeeper.certs.incluster.Conflict` is `CertWriteConflict`). Private signals that
never leave their module (the informer's `_Gone`) derive from GangkeeperError and
are not drawn. tests/unit/test_error_tree.py checks this drawing against the classes.

A recogniser that meets an object it does not know returns None (not a gang); it
raises InvalidObject only when the object claims to be something it recognises and
a field that matters is malformed. Pure module: no I/O, imported by every layer.
"""

from __future__ import annotations

import json
from typing import ClassVar


class GangkeeperError(Exception):
    """Base of every gangkeeper error."""


# -- the policy core ------------------------------------------------------------------


class PolicyError(GangkeeperError):
    """Base of all policy errors."""


class InvalidObject(PolicyError):
    """A field of a Kubernetes object is missing, mistyped or out of range."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class InvalidConfig(PolicyError):
    """A gangkeeper configuration key is unknown or has a bad value."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"config {key}: {message}")


class NotAGang(GangkeeperError, LookupError):
    """The target is not (part of) a gang gangkeeper knows; the message says why."""


class DuplicateRecognizer(GangkeeperError, ValueError):
    """A recogniser name or workload kind is registered twice."""


# -- files and the command line -------------------------------------------------------


class ConfigFileError(GangkeeperError):
    """The config file cannot be read or holds a bad value; the message names the file."""


class ManifestError(GangkeeperError):
    """A manifest file cannot be read; the message names the file and document."""


class UsageError(GangkeeperError):
    """A bad flag or file; printed without a traceback, exit code 2."""


class ClusterStateError(GangkeeperError):
    """The config, the kubeconfig or the API failed; the message says which."""


# -- the API server -------------------------------------------------------------------


class KubeconfigError(GangkeeperError):
    """No usable cluster configuration; the message says what was tried."""


class ApiError(GangkeeperError):
    """The API server answered with an error status (or could not be reached: 0).

    Constructing `ApiError(status, ...)` gives the subclass for that status (a 404 is
    a `NotFound`); a subclass constructed by name stays that class (`Timeout(0, ...)`
    for a client-side timeout).
    """

    #: The statuses a subclass stands for; filled in by `__init_subclass__`.
    by_status: ClassVar[dict[int, type[ApiError]]] = {}
    statuses: ClassVar[tuple[int, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for status in cls.statuses:
            ApiError.by_status[status] = cls

    def __new__(cls, status: int, reason: str, body: str = "") -> ApiError:
        target = ApiError.by_status.get(status, cls) if cls is ApiError else cls
        return super().__new__(target, status, reason, body)

    def __init__(self, status: int, reason: str, body: str = "") -> None:
        self.status = status
        self.reason = reason
        self.body = body
        message = reason
        try:
            parsed = json.loads(body) if body else {}
            if isinstance(parsed, dict) and parsed.get("message"):
                message = str(parsed["message"])
        except ValueError:
            pass
        super().__init__(f"HTTP {status}: {message}")


class Forbidden(ApiError):
    """403: the service account may not do this."""

    statuses = (403,)


class NotFound(ApiError):
    """404: the object (or the resource type) is not there."""

    statuses = (404,)


class Conflict(ApiError):
    """409: the object changed since it was read, or already exists."""

    statuses = (409,)


class Gone(ApiError):
    """410: the resourceVersion or continue token is too old: list again."""

    statuses = (410,)


class Invalid(ApiError):
    """422: the API server refused the object, or a JSON Patch `test` failed."""

    statuses = (422,)


class TooManyRequests(ApiError):
    """429: not now; the Eviction API's answer when a PodDisruptionBudget refuses."""

    statuses = (429,)


class Timeout(ApiError):
    """504 from the server, or the client stopped waiting (then `.status` is 0)."""

    statuses = (504,)


# -- the admission server and its certificates ----------------------------------------


class BadReview(GangkeeperError):
    """The request body is not a usable AdmissionReview; answer with `status`."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


class OwnerNotCached(GangkeeperError):
    """An owner the server's watch caches do not hold yet, which a GET may find.

    Raised by the cluster view's cache-only lookup, so that an admission that needs one
    leaves the event loop (every other admission waits on it) and is decided again in
    a worker thread, with the bounded fetch.
    """


class CertificateUnavailable(GangkeeperError):
    """The certificate or key file is missing, unreadable, or the pair does not match."""


class CertificateError(GangkeeperError, ValueError):
    """PEM material that cannot be read, named by where it came from."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source


class CertWriteConflict(GangkeeperError):
    """The object changed (409) or already exists: re-read and decide again."""


class CertSyncError(GangkeeperError, RuntimeError):
    """reconcile() could not settle the Secret; the message says which object and why."""


# -- the sandbox ----------------------------------------------------------------------


class SandboxError(GangkeeperError, RuntimeError):
    """The sandbox could not start; the message names the component and its log."""


class BinariesMissing(GangkeeperError, RuntimeError):
    """The control plane has not been built; the message says how to build it."""
