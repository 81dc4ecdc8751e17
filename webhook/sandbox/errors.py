"""The one error the sandbox raises when it cannot start or drive a component.

Defined with every other error in gangkeeper.policies.errors; re-exported here for
the sandbox modules that import it from their own package.
May touch: nothing; imported by every sandbox module.
"""

from __future__ import annotations

from gangkeeper.policies.errors import SandboxError

__all__ = ["SandboxError"]
