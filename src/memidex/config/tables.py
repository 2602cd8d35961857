"""The typed tables of ``memidex.toml``: ``[promotion]`` (docs/trust.md), ``[learning]`` and
``[model]`` (docs/learning.md), ``[brief]`` (docs/brief.md), ``[index]`` (docs/team-index.md)
— one set of checks for their keys, whole numbers and fractions.
:func:`memidex.config.load_config` builds them all when it loads the file, so a bad key
is an error of every command, never only of the one that happens to read the table.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping

from memidex.errors import ConfigError
from memidex.plain import Frozen, set_field

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DEFAULT_LIMIT", "DEFAULT_TRUST_FLOOR", "MAX_LIMIT", "BriefOptions",
           "IndexSettings", "LearningSettings", "ModelSettings", "PromotionPolicy", "check_keys",
           "fraction", "redact_url", "whole_number"]


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


def _where(source: str) -> str:
    return f"{source}: " if source else ""


class PromotionPolicy(Frozen):
    """The ``[promotion]`` table (docs/trust.md): when the gate makes a candidate active."""

    __slots__ = ("min_confirmations", "max_contradictions")
    min_confirmations: int
    max_contradictions: int

    def __init__(self, min_confirmations: int = 2, max_contradictions: int = 0) -> None:
        set_field(self, "min_confirmations", min_confirmations)
        set_field(self, "max_contradictions", max_contradictions)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "") -> PromotionPolicy:
        """An unknown key or a bad value is a ConfigError."""
        try:
            check_keys("promotion", table, ("min_confirmations", "max_contradictions"))
            return cls(whole_number("promotion", table, "min_confirmations", 2, least=1),
                       whole_number("promotion", table, "max_contradictions", 0, least=0))
        except ConfigError as exc:
            raise ConfigError(_where(source) + exc.message) from None

    def to_json(self) -> dict[str, Any]:
        return {"min_confirmations": self.min_confirmations,
                "max_contradictions": self.max_contradictions}


_INTS = {
    # key: (default, least)
    "evidence_max": (5, 1),
    "deprecate_after_runs": (3, 1),
    "max_rewrites": (20, 0),
    "resolve_after_runs": (2, 1),
    "retire_after_failures": (2, 1),
}


class LearningSettings(Frozen):
    """The ``[learning]`` table (docs/learning.md): how the curator and its checks behave.

    ``evidence_max``: evidence items a record keeps (the last ones; ``evidence_total``
    counts them all). ``deprecate_after_runs``: a record is deprecated after this many
    passing runs of its test without its anchor. ``max_rewrites``: more supersessions and
    deprecations than this in one run become proposals. ``max_body_change``: a
    supersession that changes more than this share of the body becomes a proposal.
    ``resolve_after_runs``: an unknown is resolved after its test passed this many runs
    in a row on its anchor. ``retire_after_failures``: a fact whose element a failing
    check no longer finds is retired after this many such failures (none of them flaky
    or environmental)."""

    __slots__ = ("evidence_max", "deprecate_after_runs", "max_rewrites", "max_body_change",
                 "resolve_after_runs", "retire_after_failures", "promotion")
    evidence_max: int
    deprecate_after_runs: int
    max_rewrites: int
    max_body_change: float
    resolve_after_runs: int
    retire_after_failures: int
    promotion: PromotionPolicy

    def __init__(self, evidence_max: int = 5, deprecate_after_runs: int = 3,
                 max_rewrites: int = 20, max_body_change: float = 0.8,
                 resolve_after_runs: int = 2, retire_after_failures: int = 2,
                 promotion: PromotionPolicy | None = None) -> None:
        set_field(self, "evidence_max", evidence_max)
        set_field(self, "deprecate_after_runs", deprecate_after_runs)
        set_field(self, "max_rewrites", max_rewrites)
        set_field(self, "max_body_change", max_body_change)
        set_field(self, "resolve_after_runs", resolve_after_runs)
        set_field(self, "retire_after_failures", retire_after_failures)
        set_field(self, "promotion", PromotionPolicy() if promotion is None else promotion)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "", *,
                   promotion: PromotionPolicy | None = None) -> LearningSettings:
        try:
            check_keys("learning", table, (*_INTS, "max_body_change"))
            values = {key: whole_number("learning", table, key, default, least=least)
                      for key, (default, least) in _INTS.items()}
            change = fraction("learning", table, "max_body_change", 0.8)
        except ConfigError as exc:
            raise ConfigError(_where(source) + exc.message) from None
        return cls(**values, max_body_change=change,
                   promotion=promotion or PromotionPolicy())

    def to_json(self) -> dict[str, Any]:
        # `promotion` is its own table
        return {n: getattr(self, n) for n in self.__slots__ if n != "promotion"}


class ModelSettings(Frozen):
    """The ``[model]`` table: ``command``, a program that reads a prompt on stdin and
    answers on stdout (``llm -m gpt-4o-mini``, say). Absent: no model; templates word
    everything."""

    __slots__ = ("argv", "timeout_seconds")
    argv: tuple[str, ...]
    timeout_seconds: float

    def __init__(self, argv: tuple[str, ...] = (), timeout_seconds: float = 120.0) -> None:
        set_field(self, "argv", argv)
        set_field(self, "timeout_seconds", timeout_seconds)

    @property
    def enabled(self) -> bool:
        return bool(self.argv)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "") -> ModelSettings:
        where = _where(source)
        try:
            check_keys("model", table, ("command", "timeout_seconds"))
        except ConfigError as exc:
            raise ConfigError(where + exc.message) from None
        command = table.get("command")
        if command is None:
            return cls()
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise ConfigError(f"{where}[model]: `command` cannot be split: {exc}") from None
        elif isinstance(command, list) and all(isinstance(a, str) for a in command):
            argv = list(command)
        else:
            raise ConfigError(f"{where}[model]: `command` must be a string or a list of "
                              "strings")
        if not argv:
            raise ConfigError(f"{where}[model]: `command` is empty")
        timeout = table.get("timeout_seconds", 120.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"{where}[model]: `timeout_seconds` must be a positive number")
        return cls(argv=tuple(argv), timeout_seconds=float(timeout))

    def to_json(self) -> dict[str, Any]:
        return {"command": list(self.argv) or None, "timeout_seconds": self.timeout_seconds}


DEFAULT_LIMIT = 20
"""Records a brief serves at most (``[brief] limit``, ``--limit``)."""
DEFAULT_TRUST_FLOOR = 0.1
"""Records below this trust are withheld (``[brief] trust_floor``)."""
MAX_LIMIT = 10_000


class BriefOptions(Frozen):
    """The ``[brief]`` table (docs/brief.md)."""

    __slots__ = ("candidates", "trust_floor", "limit")
    candidates: bool
    trust_floor: float
    limit: int

    def __init__(self, candidates: bool = False, trust_floor: float = DEFAULT_TRUST_FLOOR,
                 limit: int = DEFAULT_LIMIT) -> None:
        set_field(self, "candidates", candidates)
        set_field(self, "trust_floor", trust_floor)
        set_field(self, "limit", limit)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "") -> BriefOptions:
        """An unknown key or a bad value is a ConfigError."""
        try:
            check_keys("brief", table, ("candidates", "trust_floor", "limit"))
            candidates = table.get("candidates", False)
            if not isinstance(candidates, bool):
                raise ConfigError(f"[brief]: `candidates` must be true or false, got "
                                  f"{candidates!r}")
            floor = fraction("brief", table, "trust_floor", DEFAULT_TRUST_FLOOR)
            limit = whole_number("brief", table, "limit", DEFAULT_LIMIT, least=1,
                                 most=MAX_LIMIT)
        except ConfigError as exc:
            raise ConfigError(_where(source) + exc.message) from None
        return cls(candidates, floor, limit)

    def to_json(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "trust_floor": self.trust_floor,
                "limit": self.limit}


_PASSWORD = re.compile(r"(://[^:/@?#]*:)[^@/?#]*@|(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)",
                       re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` with its password (if any) shown as ``***``: in the user-info of a
    ``postgresql://USER:PASSWORD@HOST`` URL and in a ``password=...`` of a key/value
    connection string. The one masking of the team index's URL
    (``memidex.teamindex.connect.redact`` is this)."""
    def mask(m: re.Match[str]) -> str:
        return f"{m.group(1)}***@" if m.group(1) else f"{m.group(2)}***"
    return _PASSWORD.sub(mask, url)


DEFAULT_INDEX_TIMEOUT = 2.0
"""Seconds a reading command waits for the team index to answer before it uses the local
index (``[index] timeout``); libpq counts whole seconds, at least 2."""


class IndexSettings(Frozen):
    """The ``[index]`` table (docs/team-index.md): the team index on PostgreSQL that
    ``memidex index push`` fills and reading commands read. ``url`` None: no team index
    (every read is local). ``MEMIDEX_INDEX_URL`` overrides ``url``. ``branch``: the
    branch whose snapshot is read and pushed (default: the one branch pushed; a push
    defaults to the checked-out branch)."""

    __slots__ = ("url", "branch", "timeout")
    _repr_hidden = ("url",)  # it may hold a password
    url: str | None
    branch: str | None
    timeout: float

    def __init__(self, url: str | None = None, branch: str | None = None,
                 timeout: float = DEFAULT_INDEX_TIMEOUT) -> None:
        set_field(self, "url", url)
        set_field(self, "branch", branch)
        set_field(self, "timeout", timeout)

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "") -> IndexSettings:
        """An unknown key or a bad value is a ConfigError (never naming the password)."""
        try:
            check_keys("index", table, ("url", "branch", "timeout"))
            url, branch = table.get("url"), table.get("branch")
            for key, value in (("url", url), ("branch", branch)):
                if value is not None and (not isinstance(value, str) or not value.strip()):
                    # the value is not echoed: a URL may hold a password
                    raise ConfigError(f"[index]: `{key}` must be a non-empty string")
            timeout = table.get("timeout", DEFAULT_INDEX_TIMEOUT)
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or \
                    not 0 < timeout <= 600:
                raise ConfigError(f"[index]: `timeout` must be a number of seconds from 0 to "
                                  f"600, got {timeout!r}")
        except ConfigError as exc:
            raise ConfigError(_where(source) + exc.message,
                              hint="see docs/team-index.md") from None
        return cls(url.strip() if url else None, branch.strip() if branch else None,
                   float(timeout))

    def to_json(self) -> dict[str, Any]:
        return {"url": redact_url(self.url) if self.url else None, "branch": self.branch,
                "timeout": self.timeout}
