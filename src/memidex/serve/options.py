"""The ``[brief]`` table of ``memidex.toml`` (docs/brief.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memidex.errors import ConfigError

__all__ = ["DEFAULT_LIMIT", "DEFAULT_TRUST_FLOOR", "BriefOptions"]

DEFAULT_LIMIT = 20
"""Records a brief serves at most (``[brief] limit``, ``--limit``)."""
DEFAULT_TRUST_FLOOR = 0.1
"""Records below this trust are withheld (``[brief] trust_floor``)."""
MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class BriefOptions:
    candidates: bool = False
    trust_floor: float = DEFAULT_TRUST_FLOOR
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> BriefOptions:
        """Read ``Config.brief``; an unknown key or a bad value is a ConfigError."""
        unknown = sorted(set(table) - {"candidates", "trust_floor", "limit"})
        if unknown:
            raise ConfigError(f"[brief]: unknown key `{unknown[0]}` "
                              "(keys: candidates, trust_floor, limit)")
        candidates = table.get("candidates", False)
        if not isinstance(candidates, bool):
            raise ConfigError(f"[brief]: `candidates` must be true or false, got "
                              f"{candidates!r}")
        floor = table.get("trust_floor", DEFAULT_TRUST_FLOOR)
        if isinstance(floor, bool) or not isinstance(floor, int | float) or \
                not 0 <= floor <= 1:
            raise ConfigError(f"[brief]: `trust_floor` must be a number from 0 to 1, got "
                              f"{floor!r}")
        limit = table.get("limit", DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or \
                not 1 <= limit <= MAX_LIMIT:
            raise ConfigError(f"[brief]: `limit` must be a whole number from 1 to "
                              f"{MAX_LIMIT}, got {limit!r}")
        return cls(candidates, float(floor), limit)
