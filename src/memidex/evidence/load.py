"""Loading run evidence: bytes under a size cap, decoded, validated, built into values."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memidex.errors import InvalidInputError
from memidex.evidence.schema import MAX_RUN_BYTES
from memidex.evidence.validate import RunEvidenceError, Violation, validate_run
from memidex.evidence.values import Attempt, Check, Failure, Run, Step, TestResult

__all__ = ["build_run", "check_regular_file", "decode_run", "load_run", "parse_run",
           "read_run_bytes"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode_run(raw: bytes, *, source: str) -> Any:
    """The JSON data in the bytes of a run file (named ``source`` in errors), not yet
    validated: one error for bytes that are not UTF-8 or not JSON (``NaN`` included)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunEvidenceError(source, [Violation("(file)", f"not UTF-8 text at byte "
                                                            f"{exc.start}")]) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}",
                                hint="a run file is one JSON object (docs/runs.md)") from None
    except (ValueError, RecursionError) as exc:  # NaN, Infinity; nesting too deep
        raise InvalidInputError(f"{source}: not JSON: {exc}",
                                hint="a run file is one JSON object (docs/runs.md)") from None


def parse_run(raw: bytes, *, source: str) -> Run:
    """Validate the bytes of a run file (named ``source`` in errors) and return the run."""
    data = decode_run(raw, source=source)
    violations = validate_run(data)
    if violations:
        raise RunEvidenceError(source, violations)
    return build_run(data)


def check_regular_file(path: Path) -> None:
    """Refuse (exit 4) a run or report ``path`` that is there but is not a regular file —
    a FIFO, a socket, a device (a link to one included): reading it would block until a
    writer comes, or never end. A missing file or a folder is left to the reader, which
    says so in its own words."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a file")
    raise InvalidInputError(f"{path}: is {what}, not a regular file; memidex reads a run "
                            "or a report from a file", hint="write the run or report to a "
                            "file first, then pass that file")


def read_run_bytes(path: Path, *, max_bytes: int = MAX_RUN_BYTES) -> bytes:
    """The bytes of the run file ``path``; a file of ``max_bytes`` or more is refused from
    its size alone, before anything is read; anything but a regular file is refused
    (:func:`check_regular_file`)."""
    source = str(path)
    check_regular_file(path)
    try:
        size = path.stat().st_size
        if size >= max_bytes:
            raise InvalidInputError(f"{source}: the run file is {size} bytes; the limit is "
                                    f"{max_bytes} bytes", hint="split the run into smaller "
                                    "files, or leave large artifacts out of it")
        with path.open("rb") as fh:
            raw = fh.read(max_bytes)  # a file that grew meanwhile is still cut off
            if fh.read(1):
                raise InvalidInputError(f"{source}: the run file is over the limit of "
                                        f"{max_bytes} bytes")
    except FileNotFoundError:
        raise InvalidInputError(f"{source}: no such run file") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{source}: is a folder, not a run file") from None
    except PermissionError:
        raise InvalidInputError(f"{source}: cannot be read (permission denied)") from None
    return raw


def load_run(path: Path, *, max_bytes: int = MAX_RUN_BYTES) -> Run:
    """Read, validate and return the run in ``path`` (:func:`read_run_bytes`)."""
    return parse_run(read_run_bytes(path, max_bytes=max_bytes), source=str(path))


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if value else ()


def build_run(data: Mapping[str, Any]) -> Run:
    """The run in JSON data that :func:`validate_run` accepted."""
    return Run(run_id=data["run_id"], product=data["product"],
               build_tag=data.get("build_tag"), ci=bool(data.get("ci")),
               tests=tuple(_build_test(t) for t in data["tests"]))


def _build_test(t: Mapping[str, Any]) -> TestResult:
    failure = t.get("failure")
    return TestResult(
        test_id=t["test_id"], verdict=t["verdict"],
        steps=tuple(_build_step(s) for s in t.get("steps") or ()),
        failure=None if failure is None else Failure(
            message=failure["message"], hint=failure.get("hint"),
            step=_int(failure.get("step"))),
        anchors=_tuple(t.get("anchors")), artifacts=_tuple(t.get("artifacts")),
        retries=_int(t.get("retries")) or 0, duration_ms=_int(t.get("duration_ms")),
        flaky=bool(t.get("flaky")), title=t.get("title"), project=t.get("project"),
        attempts=tuple(Attempt(status=a["status"], error=a.get("error"),
                               duration_ms=_int(a.get("duration_ms")))
                       for a in t.get("attempts") or ()))


def _build_step(s: Mapping[str, Any]) -> Step:
    check = s.get("check")
    scope = s.get("scope") or {}
    return Step(
        index=int(s["index"]), action=s["action"], title=s.get("title"),
        target=s.get("target"),
        anchors=_tuple(s.get("anchors")), value=s.get("value"), observed=s.get("observed"),
        check=None if check is None else Check(kind=check["kind"], passed=check["passed"],
                                               expected=check.get("expected"),
                                               not_found=bool(check.get("not_found"))),
        error=s.get("error"), served_records=_tuple(s.get("served_records")),
        scope=tuple(sorted((k, _scalar(v)) for k, v in scope.items())),
        artifacts=_tuple(s.get("artifacts")), duration_ms=_int(s.get("duration_ms")))


def _int(value: Any) -> int | None:
    return None if value is None else int(value)  # 3.0 is a whole number in JSON Schema


def _scalar(value: Any) -> str | int | bool:
    if isinstance(value, float):
        return int(value)
    assert isinstance(value, str | int | bool)
    return value
