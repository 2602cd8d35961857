"""A run made ready for learning: masked (unless the importer masked it string by
string already), checked to be text, validated against the run format; and whether this
process runs on CI."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memidex.errors import InvalidInputError

if TYPE_CHECKING:
    from memidex.evidence import Run
    from memidex.masking import Masker

__all__ = ["env_ci", "prepare_run"]


def prepare_run(data: Any, *, source: str, masker: Masker, build_tag: str | None = None,
                ci: bool = False, default_build_tag: str | None = None,
                masked: bool = False) -> Run:
    """The run in ``data`` (decoded JSON), masked first (``masked``: it is already — a
    report's evidence, which the importer masked string by string: no second copy of a
    big run), then validated; ``build_tag`` (a flag) replaces the file's,
    ``default_build_tag`` (config, environment) fills a missing one, ``ci`` marks it a CI
    run."""
    from memidex.evidence import RunEvidenceError, Violation, build_run, validate_run

    try:
        if not masked:
            data = _mask(data, masker.mask)  # and each string checked to be text
        else:
            _encodable(data)
    except RecursionError:
        raise InvalidInputError(f"{source}: the run is nested too deeply",
                                hint="a run file is one JSON object (docs/runs.md)") from None
    except UnicodeEncodeError as exc:
        raise RunEvidenceError(source, [Violation("(file)", "holds a lone UTF-16 surrogate "
                                                            f"({exc.object[exc.start:exc.end]!r})"
                                                            ", which is not text")]) from None
    if isinstance(data, dict):
        if build_tag is not None:
            data["build_tag"] = masker.mask(build_tag)
        elif data.get("build_tag") is None and default_build_tag:
            data["build_tag"] = masker.mask(default_build_tag)
        if ci:
            data["ci"] = True
    violations = validate_run(data)
    if violations:
        raise RunEvidenceError(source, violations)
    return build_run(data)  # validated once, above


def _encodable(value: Any) -> None:
    """Raise :class:`UnicodeEncodeError` for a string that is not text (a lone UTF-16
    surrogate) anywhere in ``value`` — string by string, never the whole run as one."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii():
                v.encode("utf-8")
        elif isinstance(v, dict):
            for k, item in v.items():
                stack.append(item)
                if isinstance(k, str):
                    stack.append(k)
        elif isinstance(v, list):
            stack.extend(v)


def _mask(value: Any, mask: Callable[[str], str]) -> Any:
    """``value`` with every string masked (keys included), each masked string checked to
    be text as :func:`_encodable` checks it — one walk over the run, not two."""
    if isinstance(value, str):
        out = mask(value)
        if not out.isascii():
            out.encode("utf-8")
        return out
    if isinstance(value, list):
        return [_mask(v, mask) for v in value]
    if isinstance(value, dict):
        return {_mask(k, mask) if isinstance(k, str) else k: _mask(v, mask)
                for k, v in value.items()}
    return value


def env_ci() -> bool:
    """``CI=true`` (or 1, yes) in the environment: a CI run (SPEC §3.7)."""
    import os

    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
