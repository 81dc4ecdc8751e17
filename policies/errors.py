"""Every exception the policy core raises, in one place.

    PolicyError                  base: catch this to handle any policy failure
    ├── InvalidObject            an object (pod, workload, node) cannot be read;
    │                            names the field path, e.g. spec.containers[0]...
    └── InvalidConfig            the gangkeeper config is wrong; names the key

A recogniser that meets an object it does not know returns None (not a gang); it
raises InvalidObject only when the object claims to be something it recognises and
a field that matters is malformed. Pure module: no I/O.
"""

from __future__ import annotations


class PolicyError(Exception):
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
