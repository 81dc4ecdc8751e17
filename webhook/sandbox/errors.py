"""The one error the sandbox raises when it cannot start or drive a component.

May touch: nothing; imported by every sandbox module.
"""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The sandbox could not start; the message names the component and its log."""
