"""Structured logs: one JSON object per line on stderr (or one line for people).

`configure(level, fmt)` installs `JsonFormatter` (or, with `fmt="text"`,
`TextFormatter`: `time level logger: msg key=value ...`, the same fields) on the root
logger and returns the `log_config` uvicorn should use so its own lines match.
`default_format(stream)` is text on a terminal and JSON anywhere else (a pod, a file,
a pipe into a collector). Fields passed with
`extra={...}` become top-level keys. Admission requests are logged by the app as one
line each with the request uid and a summary (kind, namespace, name, operation,
verdict, duration); whole objects are never logged at info level, since pods carry
environment variables and other data that does not belong in logs.

May write to stderr through `logging`; nothing else.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn adds a coloured copy of the message
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """Render a record as a single-line JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(JsonFormatter):
    """The fields of `JsonFormatter` as one line: `time level logger: msg k=v ...`."""

    def format(self, record: logging.LogRecord) -> str:
        entry = json.loads(super().format(record))
        head = f"{entry.pop('time')} {entry.pop('level')} {entry.pop('logger')}: "
        exc = entry.pop("exc", None)
        line = head + str(entry.pop("msg")) + "".join(
            f" {key}={value}" for key, value in entry.items()
        )
        return line if exc is None else f"{line}\n{exc}"


FORMATS = {"json": JsonFormatter, "text": TextFormatter}


def default_format(stream: Any = None) -> str:
    """`text` when `stream` (stderr) is a terminal, else `json`."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def configure(level: str = "info", fmt: str = "json") -> dict[str, Any]:
    """Logs for the whole process in `fmt` (json or text); returns uvicorn's matching
    `log_config`."""
    formatter = FORMATS[fmt]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {
            "json": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
        },
        "loggers": {
            "uvicorn": {"handlers": ["json"], "level": level.upper(), "propagate": False},
            # The app logs each admission itself, with the uid; uvicorn's access line
            # would only duplicate it without the useful fields.
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }
