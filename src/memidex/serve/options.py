"""The ``[brief]`` table of ``memidex.toml`` (docs/brief.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memidex.config import check_keys, fraction, whole_number
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
        check_keys("brief", table, ("candidates", "trust_floor", "limit"))
        candidates = table.get("candidates", False)
        if not isinstance(candidates, bool):
            raise ConfigError(f"[brief]: `candidates` must be true or false, got "
                              f"{candidates!r}")
        floor = fraction("brief", table, "trust_floor", DEFAULT_TRUST_FLOOR)
        limit = whole_number("brief", table, "limit", DEFAULT_LIMIT, least=1, most=MAX_LIMIT)
        return cls(candidates, floor, limit)
