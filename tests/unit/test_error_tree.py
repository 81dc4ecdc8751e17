"""One error tree: every exception the product defines derives from GangkeeperError,
and the tree drawn in gangkeeper.policies.errors' docstring is the real one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import gangkeeper.certs
import gangkeeper.policies
import gangkeeper.webhook

PACKAGES = (gangkeeper.policies, gangkeeper.webhook, gangkeeper.certs)


def product_modules() -> list[ModuleType]:
    """Every module of the three product packages (`__main__` would run the CLI)."""
    modules: list[ModuleType] = []
    for package in PACKAGES:
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.rsplit(".", 1)[-1] != "__main__":
                modules.append(importlib.import_module(info.name))
    return modules


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Exception classes by qualified name, each where it is defined (not re-exported)."""
    found: dict[str, type[BaseException]] = {}
    for module in product_modules():
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{value.__qualname__}"] = value
    return found


def drawn_tree() -> dict[str, str | None]:
    """Class name -> the parent the docstring draws it under (None for the root)."""
    errors = importlib.import_module("gangkeeper.policies.errors")
    lines = [line for line in (errors.__doc__ or "").splitlines() if re.search(r"\w", line)]
    tree: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in lines:
        drawn = re.match(r"^(\s*(?:[│ ]   )*(?:[├└]── )?)([A-Z]\w+)", line)
        if drawn is None or not ("──" in line or drawn.group(2) == "GangkeeperError"):
            continue
        depth, name = len(drawn.group(1)), drawn.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        tree[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return tree


def test_every_exception_the_product_defines_derives_from_gangkeeper_error() -> None:
    from gangkeeper.policies.errors import GangkeeperError

    strays = sorted(
        name for name, cls in defined_exceptions().items() if not issubclass(cls, GangkeeperError)
    )
    assert strays == []


def test_the_drawn_tree_names_every_public_exception() -> None:
    public = {
        cls.__name__ for cls in defined_exceptions().values() if not cls.__name__.startswith("_")
    }
    assert sorted(public - set(drawn_tree())) == []


@pytest.mark.parametrize("name", sorted(drawn_tree()) or ["(no tree drawn)"])
def test_each_drawn_class_sits_under_the_parent_drawn(name: str) -> None:
    errors = importlib.import_module("gangkeeper.policies.errors")
    tree = drawn_tree()
    assert name in tree
    cls = getattr(errors, name)
    parent = tree[name]
    if parent is None:
        assert cls.__bases__ == (Exception,)
    else:
        assert cls.__bases__[0] is getattr(errors, parent)


def test_public_exceptions_live_in_the_errors_module() -> None:
    """Defined once, in the pure module every layer may import; elsewhere only re-exported."""
    elsewhere = sorted(
        name
        for name, cls in defined_exceptions().items()
        if not cls.__name__.startswith("_") and cls.__module__ != "gangkeeper.policies.errors"
    )
    assert elsewhere == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [(403, "Forbidden"), (404, "NotFound"), (409, "Conflict"), (410, "Gone"),
     (422, "Invalid"), (504, "Timeout"), (500, "ApiError"), (0, "ApiError")],
)
def test_an_api_error_is_the_subclass_for_its_status(status: int, expected: str) -> None:
    from gangkeeper.webhook.kube.api import ApiError

    err = ApiError(status, "Reason", '{"message": "pods \\"p\\" not found"}')
    assert type(err).__name__ == expected
    assert err.status == status
    assert str(err) == f'HTTP {status}: pods "p" not found'


def test_a_client_timeout_is_a_timeout_with_status_zero() -> None:
    import urllib3.exceptions

    from gangkeeper.webhook.kube.api import ApiError, Timeout
    from gangkeeper.webhook.kube.rest import _unreachable

    timed_out = _unreachable(urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"))
    refused = _unreachable(ConnectionRefusedError("refused"))
    assert isinstance(timed_out, Timeout) and timed_out.status == 0
    assert type(refused) is ApiError and refused.status == 0
