"""The exit codes of every gangkeeper command, defined once.

0 is success, 1 a verdict the caller asked about (a gang rejected, left gated, or
not a gang), 2 bad input or a cluster that could not be read. Constants only: the
commands import them, and tests/unit/test_exit_codes.py checks no other module
defines its own.
"""

from __future__ import annotations

EXIT_OK = 0
#: check: every gang would be admitted.
EXIT_ADMITTED = EXIT_OK
#: check: at least one gang would be rejected.
EXIT_REJECTED = 1
#: ungate: gangs were left gated (or a patch was refused).
EXIT_LEFT_GATED = 1
#: explain: the target is no gang gangkeeper knows.
EXIT_NOT_A_GANG = 1
#: A bad flag, file or object, or the API server could not be read.
EXIT_BAD_INPUT = 2
#: A writer a closed pipe stopped (128 + SIGPIPE), as a shell reports it for kubectl
#: and every other tool that `head` cuts short.
EXIT_BROKEN_PIPE = 141
