"""Finding the repository root and reading ``memidex.toml``, validated whole at load.

Precedence is flags > environment > file > defaults. This is the only module that
reads ``MEMIDEX_*`` environment variables. Every table (``[promotion]``, ``[learning]``,
``[model]``, ``[brief]``, ``[secrets]``, ``[index]``) is checked by :func:`load_config`
into its typed settings (:mod:`memidex.config.tables`), so a bad key is found by every
command — and reported by ``doctor`` and ``check`` (``strict=False`` keeps the problems
instead of raising them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from memidex.config.tables import (
    BriefOptions,
    IndexSettings,
    LearningSettings,
    ModelSettings,
    PromotionPolicy,
    check_keys,
    fraction,
    whole_number,
)
from memidex.errors import ConfigError, NotFoundError, Problem
from memidex.plain import Frozen, set_field
from memidex.tomlfast import loads as quick_toml

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "CONFIG_FILE",
    "BriefOptions",
    "Config",
    "IndexSettings",
    "LearningSettings",
    "ModelSettings",
    "PromotionPolicy",
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
INDEX_URL_ENV = "MEMIDEX_INDEX_URL"
"""Overrides ``[index] url`` (docs/team-index.md)."""


_DEFAULT_PROMOTION = PromotionPolicy()
_DEFAULT_BRIEF = BriefOptions()
_DEFAULT_LEARNING = LearningSettings()
_DEFAULT_MODEL = ModelSettings()
_DEFAULT_INDEX = IndexSettings()


class Config(Frozen):
    """Resolved configuration. Paths are relative to ``root`` unless absolute.

    ``notes_max_age_hours``: working memory older than this is pruned (a week).
    ``promotion``: [promotion], docs/trust.md; ``secrets``: [secrets] allow = [...];
    ``brief``: [brief], docs/brief.md; ``learning``, ``model``: docs/learning.md;
    ``index``: [index], docs/team-index.md. ``problems``: with
    ``load_config(strict=False)``, what is wrong in the file (each key's problem, the key
    left at its default); ``doctor`` and ``check`` report them."""

    __slots__ = ("root", "knowledge_dir", "policies_dir", "state_dir", "product",
                 "build_tag", "secrets_file", "model_cache_dir", "lease_ttl_seconds",
                 "notes_max_age_hours", "promotion", "secrets", "brief", "learning", "model",
                 "index", "half_life_runs", "config_file", "problems")
    root: Path
    knowledge_dir: str
    policies_dir: str
    state_dir: str
    product: str | None
    build_tag: str | None
    secrets_file: str
    model_cache_dir: str
    lease_ttl_seconds: float
    notes_max_age_hours: float
    promotion: PromotionPolicy
    secrets: Mapping[str, Any]
    brief: BriefOptions
    learning: LearningSettings
    model: ModelSettings
    index: IndexSettings
    half_life_runs: Mapping[str, int]
    config_file: Path | None
    problems: tuple[Problem, ...]

    def __init__(self, root: Path, knowledge_dir: str = "agent-qa-knowledge/memory",
                 policies_dir: str = "policies", state_dir: str = ".agent-qa",
                 product: str | None = None, build_tag: str | None = None,
                 secrets_file: str = ".agent-qa/secrets.yaml",
                 model_cache_dir: str = "~/.cache/memidex/models",
                 lease_ttl_seconds: float = 30.0, notes_max_age_hours: float = 168.0,
                 promotion: PromotionPolicy = _DEFAULT_PROMOTION,
                 secrets: Mapping[str, Any] | None = None,
                 brief: BriefOptions = _DEFAULT_BRIEF,
                 learning: LearningSettings = _DEFAULT_LEARNING,
                 model: ModelSettings = _DEFAULT_MODEL, index: IndexSettings = _DEFAULT_INDEX,
                 half_life_runs: Mapping[str, int] | None = None,
                 config_file: Path | None = None, problems: tuple[Problem, ...] = ()) -> None:
        set_field(self, "root", root)
        set_field(self, "knowledge_dir", knowledge_dir)
        set_field(self, "policies_dir", policies_dir)
        set_field(self, "state_dir", state_dir)
        set_field(self, "product", product)
        set_field(self, "build_tag", build_tag)
        set_field(self, "secrets_file", secrets_file)
        set_field(self, "model_cache_dir", model_cache_dir)
        set_field(self, "lease_ttl_seconds", lease_ttl_seconds)
        set_field(self, "notes_max_age_hours", notes_max_age_hours)
        set_field(self, "promotion", promotion)
        set_field(self, "secrets", {} if secrets is None else secrets)
        set_field(self, "brief", brief)
        set_field(self, "learning", learning)
        set_field(self, "model", model)
        set_field(self, "index", index)
        set_field(self, "half_life_runs", (dict(DEFAULT_HALF_LIFE_RUNS) if half_life_runs is None
                                        else half_life_runs))
        set_field(self, "config_file", config_file)
        set_field(self, "problems", problems)

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

    def to_json(self) -> dict[str, Any]:
        """The effective configuration, as ``doctor --json`` prints it."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "problems":
                value = [p.as_dict() for p in value]
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            elif hasattr(value, "to_json"):
                value = value.to_json()
            out[name] = value
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
    if key in ("lease_ttl_seconds", "notes_max_age_hours"):
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{source}: `{key}` must be a positive number")
        return float(value)
    if key == "promotion":
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: `promotion` must be a table")
        return PromotionPolicy.from_table(value, source)
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
        if key == "model":
            return ModelSettings.from_table(value, source)
        return value  # with [promotion], in load_config: LearningSettings holds both
    if key == "brief":
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: `[brief]` must be a table (docs/brief.md)")
        return BriefOptions.from_table(value, source)
    if key == "index":
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: `[index]` must be a table (docs/team-index.md)")
        return IndexSettings.from_table(value, source)
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
    strict: bool = True,
) -> Config:
    """Resolve the configuration for ``root`` (discovered when ``None``), every table
    checked. ``strict=False``: a bad key of the file leaves that key at its default and is
    kept in ``Config.problems`` (with its line) instead of being raised — for ``doctor``
    and ``check``, which report it; a file that is not TOML is raised either way."""
    resolved_root = root.resolve() if root is not None else find_root()
    if root is not None and not resolved_root.is_dir():
        raise NotFoundError(f"--root {root} is not a folder",
                            hint="give the repository's folder (where memidex.toml or .git is)")
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    config_file = resolved_root / CONFIG_FILE
    found: Path | None = None
    if config_file.is_file():
        found = config_file
        try:
            text = config_file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{config_file}: {exc}") from None
        data = _toml(text, config_file)
        for key, value in data.items():
            try:
                values[key] = _check_value(key, value, str(config_file))
            except ConfigError as exc:
                if strict:
                    raise
                problems.append(Problem(str(config_file), _key_line(text, key),
                                        exc.message.removeprefix(f"{config_file}: ")))
    env = os.environ if environ is None else environ
    for var, key in ENV_KEYS.items():
        if env.get(var):
            values[key] = _check_value(key, env[var], var)
    if env.get(INDEX_URL_ENV):
        values["index"] = values.get("index", IndexSettings()).replace(
                                  url=env[INDEX_URL_ENV].strip())
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = _check_value(key, value, f"--{key.replace('_', '-')}")
    learning = values.pop("learning", None)
    if learning is not None or "promotion" in values:
        try:
            values["learning"] = LearningSettings.from_table(
                learning or {}, str(found or CONFIG_FILE),
                promotion=values.get("promotion", PromotionPolicy()))
        except ConfigError as exc:
            if strict:
                raise
            problems.append(Problem(str(found or CONFIG_FILE),
                                    _key_line(text if found else "", "learning"),
                                    exc.message.removeprefix(f"{found}: ")))
    config = Config(root=resolved_root, config_file=found, problems=tuple(problems))
    return config.replace(**values)


def _toml(text: str, config_file: Path) -> dict[str, Any]:
    """The file's table: its usual forms read quickly (:mod:`memidex.tomlfast`), anything
    else by ``tomllib``, which also names what is wrong."""
    data = quick_toml(text)
    if data is not None:
        return data
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file}: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or table
        raise ConfigError(f"{config_file}: nested too deeply to be read") from None


def _key_line(text: str, key: str) -> int:
    """The line of ``memidex.toml`` where ``key`` (a key or a ``[table]``) is set (1 when it
    cannot be told)."""
    import re

    pattern = re.compile(rf"^\s*(?:\[\s*{re.escape(key)}\s*\]|{re.escape(key)}\s*=)")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return 1
