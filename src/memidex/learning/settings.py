"""The ``[learning]`` and ``[model]`` tables of ``memidex.toml`` (``docs/learning.md``)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memidex.config import check_keys, fraction, whole_number
from memidex.errors import ConfigError
from memidex.trust import PromotionPolicy

__all__ = ["LearningSettings", "ModelSettings"]

_INTS = {
    # key: (default, least)
    "evidence_max": (5, 1),
    "deprecate_after_runs": (3, 1),
    "max_rewrites": (20, 0),
}


@dataclass(frozen=True, slots=True)
class LearningSettings:
    """How the curator and its checks behave."""

    evidence_max: int = 5
    """Evidence items a record keeps (the last ones; ``evidence_total`` counts them all)."""
    deprecate_after_runs: int = 3
    """A record is deprecated after this many passing runs of its test without its anchor."""
    max_rewrites: int = 20
    """More supersessions and deprecations than this in one run become proposals."""
    max_body_change: float = 0.8
    """A supersession that changes more than this share of the body becomes a proposal."""
    promotion: PromotionPolicy = PromotionPolicy()

    @classmethod
    def from_config(cls, table: Mapping[str, Any],
                    promotion: Mapping[str, Any]) -> LearningSettings:
        check_keys("learning", table, (*_INTS, "max_body_change"))
        values = {key: whole_number("learning", table, key, default, least=least)
                  for key, (default, least) in _INTS.items()}
        change = fraction("learning", table, "max_body_change", 0.8)
        return cls(**values, max_body_change=change,
                   promotion=PromotionPolicy.from_config(promotion))


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """``[model] command``: a program that reads a prompt on stdin and answers on stdout
    (``llm -m gpt-4o-mini``, say). Absent: no model; templates word everything."""

    argv: tuple[str, ...] = ()
    timeout_seconds: float = 120.0

    @property
    def enabled(self) -> bool:
        return bool(self.argv)

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> ModelSettings:
        check_keys("model", table, ("command", "timeout_seconds"))
        command = table.get("command")
        if command is None:
            return cls()
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise ConfigError(f"[model]: `command` cannot be split: {exc}") from None
        elif isinstance(command, list) and all(isinstance(a, str) for a in command):
            argv = list(command)
        else:
            raise ConfigError("[model]: `command` must be a string or a list of strings")
        if not argv:
            raise ConfigError("[model]: `command` is empty")
        timeout = table.get("timeout_seconds", 120.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError("[model]: `timeout_seconds` must be a positive number")
        return cls(argv=tuple(argv), timeout_seconds=float(timeout))
