"""Structured logs: one JSON object per line on stderr.

`configure(level)` installs `JsonFormatter` on the root logger and returns the
`log_config` uvicorn should use so its own lines are JSON too. Fields passed with
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


def configure(level: str = "info") -> dict[str, Any]:
    """JSON logs for the whole process; returns uvicorn's matching `log_config`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
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
