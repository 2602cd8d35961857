"""Finding the repository root and reading ``memidex.toml``.

Precedence is flags > environment > file > defaults. This is the only module that
reads ``MEMIDEX_*`` environment variables.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from memidex.errors import ConfigError, NotFoundError

__all__ = [
    "CONFIG_FILE",
    "Config",
    "DEFAULT_HALF_LIFE_RUNS",
    "check_keys",
    "find_root",
    "fraction",
    "load_config",
    "whole_number",
]

CONFIG_FILE = "memidex.toml"

DEFAULT_HALF_LIFE_RUNS: dict[str, int] = {
    "fact": 200,
    "procedure": 100,
    "caution": 20,
    "unknown": 10,
}

ENV_KEYS = {
    "MEMIDEX_BUILD_TAG": "build_tag",
    "MEMIDEX_SECRETS_FILE": "secrets_file",
    "MEMIDEX_MODEL_CACHE_DIR": "model_cache_dir",
}


@dataclass(frozen=True)
class Config:
    """Resolved configuration. Paths are relative to ``root`` unless absolute."""

    root: Path
    knowledge_dir: str = "agent-qa-knowledge/memory"
    policies_dir: str = "policies"
    state_dir: str = ".agent-qa"
    product: str | None = None
    build_tag: str | None = None
    secrets_file: str = ".agent-qa/secrets.yaml"
    model_cache_dir: str = "~/.cache/memidex/models"
    lease_ttl_seconds: float = 30.0
    promotion: Mapping[str, Any] = field(default_factory=dict)
    secrets: Mapping[str, Any] = field(default_factory=dict)  # [secrets] allow = [...]
    brief: Mapping[str, Any] = field(default_factory=dict)  # [brief]: docs/brief.md
    learning: Mapping[str, Any] = field(default_factory=dict)  # [learning]: docs/learning.md
    model: Mapping[str, Any] = field(default_factory=dict)  # [model]: docs/learning.md
    half_life_runs: Mapping[str, int] = field(
        default_factory=lambda: dict(DEFAULT_HALF_LIFE_RUNS)
    )
    config_file: Path | None = None

    @property
    def knowledge_path(self) -> Path:
        return self.root / self.knowledge_dir

    @property
    def policies_path(self) -> Path:
        return self.root / self.policies_dir

    @property
    def state_path(self) -> Path:
        return self.root / self.state_dir

    @property
    def index_path(self) -> Path:
        return self.knowledge_path / "index" / "memidex.sqlite"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        return out


_STR_KEYS = {
    "knowledge_dir",
    "policies_dir",
    "state_dir",
    "product",
    "build_tag",
    "secrets_file",
    "model_cache_dir",
}


# --- the keys of a table section ([promotion], [learning], [brief]): one set of checks

def check_keys(section: str, table: Mapping[str, Any], keys: Iterable[str]) -> None:
    """A ConfigError naming the first key of ``table`` that is not one of ``keys``."""
    known = sorted(keys)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"[{section}]: unknown key `{unknown[0]}` (keys: "
                          f"{', '.join(known)})")


def whole_number(section: str, table: Mapping[str, Any], key: str, default: int, *,
                 least: int, most: int = 2**63 - 1) -> int:
    """``table[key]`` (``default`` when absent): a whole number from ``least`` to ``most``,
    else a ConfigError."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        bound = f">= {least}" if most == 2**63 - 1 else f"from {least} to {most}"
        raise ConfigError(f"[{section}]: `{key}` must be a whole number {bound}, "
                          f"got {value!r}")
    return value


def fraction(section: str, table: Mapping[str, Any], key: str, default: float) -> float:
    """``table[key]`` (``default`` when absent): a number from 0 to 1, else a ConfigError."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"[{section}]: `{key}` must be a number from 0 to 1, got "
                          f"{value!r}")
    return float(value)


def find_root(start: Path | None = None) -> Path:
    """Walk up from ``start`` to the folder holding ``memidex.toml``, else the git top level."""
    here = (start or Path.cwd()).resolve()
    git_top: Path | None = None
    for folder in (here, *here.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
        if git_top is None and (folder / ".git").exists():
            git_top = folder
    if git_top is not None:
        return git_top
    raise NotFoundError(
        f"no memidex root above {here}: found neither {CONFIG_FILE} nor a git repository",
        hint="run `memidex init` in your repository, or pass --root PATH",
    )


def _check_value(key: str, value: Any, source: str) -> Any:
    if key in _STR_KEYS:
        if not isinstance(value, str) or (key != "product" and not value):
            raise ConfigError(f"{source}: `{key}` must be a non-empty string")
        return value
    if key == "lease_ttl_seconds":
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{source}: `lease_ttl_seconds` must be a positive number")
        return float(value)
    if key == "promotion":
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: `promotion` must be a table")
        return dict(value)
    if key == "secrets":
        allow = value.get("allow", []) if isinstance(value, dict) else None
        if not isinstance(value, dict) or set(value) - {"allow"} or not isinstance(
                allow, list) or not all(isinstance(v, str) and v for v in allow):
            raise ConfigError(f"{source}: `[secrets]` takes one key, `allow`: a list of "
                              "values or fingerprints the secret scan may ignore")
        return {"allow": list(allow)}
    if key in ("learning", "model"):
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: `[{key}]` must be a table (docs/learning.md)")
        return dict(value)  # its keys are checked by memidex.learning.settings
    if key == "brief":
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: `[brief]` must be a table (docs/brief.md)")
        return dict(value)  # its keys are checked by memidex.serve.options
    if key == "half_life_runs":
        if not isinstance(value, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value.values()
        ):
            raise ConfigError(
                f"{source}: `half_life_runs` must map kinds to positive whole numbers of runs"
            )
        merged = dict(DEFAULT_HALF_LIFE_RUNS)
        merged.update(value)
        return merged
    raise ConfigError(f"{source}: unknown key `{key}`", hint="see docs/configuration.md")


def load_config(
    root: Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Resolve the configuration for ``root`` (discovered when ``None``)."""
    resolved_root = root.resolve() if root is not None else find_root()
    if root is not None and not resolved_root.is_dir():
        raise NotFoundError(f"--root {root} is not a folder",
                            hint="give the repository's folder (where memidex.toml or .git is)")
    values: dict[str, Any] = {}
    config_file = resolved_root / CONFIG_FILE
    found: Path | None = None
    if config_file.is_file():
        found = config_file
        try:
            data = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{config_file}: {exc}") from None
        for key, value in data.items():
            values[key] = _check_value(key, value, str(config_file))
    env = os.environ if environ is None else environ
    for var, key in ENV_KEYS.items():
        if env.get(var):
            values[key] = _check_value(key, env[var], var)
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = _check_value(key, value, f"--{key.replace('_', '-')}")
    config = Config(root=resolved_root, config_file=found)
    return replace(config, **values)
