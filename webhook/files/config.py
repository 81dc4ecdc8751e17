"""Reading gangkeeper's config file (the YAML a ConfigMap mounts) into a `Config`.

Shared by every command that takes `--config`. Reads one file; the checking of keys
and values is `gangkeeper.policies.settings.config.load_config`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from gangkeeper.policies.errors import ConfigFileError as ConfigFileError
from gangkeeper.policies.errors import InvalidConfig
from gangkeeper.policies.settings.config import Config, load_config


def load_config_file(path: str | Path | None) -> Config:
    """The config in `path`; the defaults when `path` is None or empty."""
    if not path:
        return load_config(None)
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigFileError(f"{path}: cannot read config: {exc}") from exc
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigFileError(f"{path}: expected a mapping, got {type(raw).__name__}")
    try:
        return load_config(raw)
    except InvalidConfig as exc:
        raise ConfigFileError(f"{path}: {exc}") from exc
