"""Run evidence: the JSON a test run hands to ``memidex runs ingest`` (SPEC §3).

The schema is built here (:func:`run_schema`) and published, byte for byte, as
``docs/run-evidence.schema.json`` (a test keeps the two equal: regenerate with
``python -m memidex.runs.evidence > docs/run-evidence.schema.json``). :func:`load_run`
reads a file under a size cap, validates it with ``jsonschema`` (imported only here,
inside the function) plus the checks a pattern cannot make, and returns frozen values.
Every violation is reported, each with its JSON path, in one :class:`RunEvidenceError`.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from memidex.errors import InvalidInputError
from memidex.records.ids import ANCHOR_RE, ID_RE, PRODUCT_RE
from memidex.records.model import MAX_ORDINAL
from memidex.records.vocab import Pairs

__all__ = [
    "ATTEMPT_STATUSES",
    "HINTS",
    "MAX_RUN_BYTES",
    "VERDICTS",
    "Attempt",
    "Check",
    "Failure",
    "Run",
    "RunEvidenceError",
    "Step",
    "TestResult",
    "Violation",
    "build_run",
    "decode_run",
    "load_run",
    "parse_run",
    "read_run_bytes",
    "run_schema",
    "schema_text",
    "validate_run",
]

MAX_RUN_BYTES = 50 * 1024 * 1024
"""A run file this big or bigger is refused before it is read."""

VERDICTS: tuple[str, ...] = ("pass", "fail", "skip", "error")
HINTS: tuple[str, ...] = ("flaky", "environment", "app-bug", "test-bug", "unknown")
ATTEMPT_STATUSES: tuple[str, ...] = ("pass", "fail", "timeout", "skip", "interrupted",
                                     "error")
"""How one attempt of a test ended (a runner's retries: one attempt each)."""
MAX_ATTEMPTS = 100
MAX_MESSAGES = 20
"""How many violations the error's one-line message spells out (all are in ``.violations``)."""

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
BUILD_TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+/-]{0,127}$"
TEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$"
WORD_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
SCOPE_KEY_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
ARTIFACT_PATTERN = r"^artifacts(/(?!\.\.?(/|$))[A-Za-z0-9._@+=-]{1,255})+$"
ANCHOR_WORDS = ("an anchor, type:value (a lowercase type, a colon, a value without edge "
                "spaces)")
_ARTIFACT_RE = re.compile(ARTIFACT_PATTERN[1:-1])
_RUN_ID_RE = re.compile(RUN_ID_PATTERN[1:-1])
_BUILD_TAG_RE = re.compile(BUILD_TAG_PATTERN[1:-1])
_TEST_ID_RE = re.compile(TEST_ID_PATTERN[1:-1])


# -- the schema -------------------------------------------------------------------------

def _str(pattern: str | None = None, *, max_len: int = 200, nullable: bool = False,
         description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": ["string", "null"] if nullable else "string",
                           "maxLength": max_len}
    if pattern is not None:
        out["pattern"] = pattern
    if description is not None:
        out["description"] = description
    return out


def _count(*, nullable: bool = False, description: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": ["integer", "null"] if nullable else "integer",
                           "minimum": 0, "maximum": MAX_ORDINAL}
    if description is not None:
        out["description"] = description
    return out


def _list(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": ["array", "null"], "items": items, "maxItems": max_items}


def run_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a run file."""
    anchor = {"$ref": "#/$defs/anchor"}
    extensions = {"^x-": {"description": "extension keys, kept out of memidex's way"}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://memidex.dev/schemas/run-evidence.schema.json",
        "title": "memidex run evidence",
        "description": "What one test run saw, step by step (docs/runs.md).",
        "type": "object",
        "required": ["run_id", "product", "tests"],
        "additionalProperties": False,
        "patternProperties": extensions,
        "properties": {
            "run_id": _str(RUN_ID_PATTERN, max_len=128, description=(
                "a run id: a letter or digit, then letters, digits, `.`, `_`, `-`")),
            "product": _str("^" + PRODUCT_RE.pattern + "$", max_len=100, description=(
                "a product name: a letter or digit, then letters, digits, `.`, `_`, `-`")),
            "build_tag": _str(BUILD_TAG_PATTERN, max_len=128, nullable=True, description=(
                "a build tag: a letter or digit, then letters, digits, `.`, `_`, `+`, "
                "`/`, `-`")),
            "ci": {"type": ["boolean", "null"]},
            "tests": {"type": "array", "items": {"$ref": "#/$defs/test"},
                      "minItems": 1, "maxItems": 100_000},
        },
        "$defs": {
            "anchor": _str("^" + ANCHOR_RE.pattern + "$", max_len=500,
                           description=ANCHOR_WORDS),
            "artifact": _str(ARTIFACT_PATTERN, max_len=1000, description=(
                "a relative path inside artifacts/ (no `..`, `.` or empty parts)")),
            "record_id": _str("^" + ID_RE.pattern + "$", description=(
                "a record id: lowercase letters, digits and `-`")),
            "text": _str(max_len=10_000, nullable=True),
            "test": {
                "type": "object",
                "required": ["test_id", "verdict"],
                "additionalProperties": False,
                "patternProperties": extensions,
                "properties": {
                    "test_id": _str(TEST_ID_PATTERN, description=(
                        "a test id: a letter or digit, then letters, digits, "
                        "`.`, `_`, `:`, `/`, `@`, `-`")),
                    "verdict": {"enum": list(VERDICTS)},
                    "retries": _count(nullable=True, description=(
                        "attempts before the verdict, beyond the first")),
                    "flaky": {"type": ["boolean", "null"], "description": (
                        "the runner saw the test fail, then pass on a retry")},
                    "attempts": _list({"$ref": "#/$defs/attempt"}, MAX_ATTEMPTS),
                    "duration_ms": _count(nullable=True),
                    "anchors": _list(anchor, 64),
                    "steps": _list({"$ref": "#/$defs/step"}, 10_000),
                    "failure": {"$ref": "#/$defs/failure"},
                    "artifacts": _list({"$ref": "#/$defs/artifact"}, 100),
                },
            },
            "attempt": {
                "type": "object",
                "required": ["status"],
                "additionalProperties": False,
                "properties": {
                    "status": {"enum": list(ATTEMPT_STATUSES)},
                    "error": {"$ref": "#/$defs/text"},
                    "duration_ms": _count(nullable=True),
                },
            },
            "step": {
                "type": "object",
                "required": ["index", "action"],
                "additionalProperties": False,
                "patternProperties": extensions,
                "properties": {
                    "index": _count(),
                    "action": _str(WORD_PATTERN, max_len=64, description=(
                        "an action word: lowercase letters, digits, `_`, `-`")),
                    "title": _str(max_len=1000, nullable=True, description=(
                        "the step's own words (a test.step title)")),
                    "target": _str("^" + ANCHOR_RE.pattern + "$", max_len=500,
                                   nullable=True, description=ANCHOR_WORDS),
                    "anchors": _list(anchor, 64),
                    "value": {"$ref": "#/$defs/text"},
                    "observed": {"$ref": "#/$defs/text"},
                    "check": {
                        "type": ["object", "null"],
                        "required": ["kind", "passed"],
                        "additionalProperties": False,
                        "properties": {
                            "kind": _str(WORD_PATTERN, max_len=64, description=(
                                "a check kind: lowercase letters, digits, `_`, `-`")),
                            "passed": {"type": "boolean"},
                            "expected": {"$ref": "#/$defs/text"},
                        },
                    },
                    "error": {"$ref": "#/$defs/text"},
                    "served_records": _list({"$ref": "#/$defs/record_id"}, 1000),
                    "scope": {
                        "type": ["object", "null"],
                        "maxProperties": 16,
                        "propertyNames": {"pattern": SCOPE_KEY_PATTERN, "maxLength": 64,
                                          "description": "a scope key (lowercase letters, "
                                                         "digits, `_`)"},
                        "additionalProperties": {
                            "type": ["string", "integer", "boolean"], "maxLength": 200,
                            "minimum": -MAX_ORDINAL - 1, "maximum": MAX_ORDINAL},
                    },
                    "artifacts": _list({"$ref": "#/$defs/artifact"}, 100),
                    "duration_ms": _count(nullable=True),
                },
            },
            "failure": {
                "type": ["object", "null"],
                "required": ["message"],
                "additionalProperties": False,
                "properties": {
                    "message": _str(max_len=10_000),
                    "hint": {"enum": [*HINTS, None]},
                    "step": _count(nullable=True, description="the index of the failing step"),
                },
            },
        },
    }


def schema_text() -> str:
    """The schema as published in ``docs/run-evidence.schema.json``."""
    return json.dumps(run_schema(), indent=2, ensure_ascii=False) + "\n"


# -- the values ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Check:
    kind: str
    passed: bool
    expected: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    hint: str | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a test that the runner retried: how it ended and its error."""

    status: str
    error: str | None = None
    duration_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    action: str
    target: str | None = None
    anchors: tuple[str, ...] = ()
    value: str | None = None
    observed: str | None = None
    check: Check | None = None
    error: str | None = None
    served_records: tuple[str, ...] = ()
    scope: Pairs = ()
    artifacts: tuple[str, ...] = ()
    duration_ms: int | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class TestResult:
    __test__ = False  # not a pytest class

    test_id: str
    verdict: str
    steps: tuple[Step, ...] = ()
    failure: Failure | None = None
    anchors: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    retries: int = 0
    duration_ms: int | None = None
    flaky: bool = False
    attempts: tuple[Attempt, ...] = ()

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    product: str
    tests: tuple[TestResult, ...]
    build_tag: str | None = None
    ci: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The run as JSON data in the schema's shape (every key, ``null`` when unset);
        :func:`parse_run` of it gives this run back."""
        return {
            "run_id": self.run_id, "product": self.product, "build_tag": self.build_tag,
            "ci": self.ci, "tests": [_test_dict(t) for t in self.tests],
        }


def _test_dict(t: TestResult) -> dict[str, Any]:
    failure = None if t.failure is None else {
        "message": t.failure.message, "hint": t.failure.hint, "step": t.failure.step}
    return {"test_id": t.test_id, "verdict": t.verdict, "retries": t.retries,
            "duration_ms": t.duration_ms, "anchors": list(t.anchors),
            "steps": [_step_dict(s) for s in t.steps], "failure": failure,
            "artifacts": list(t.artifacts), "flaky": t.flaky,
            "attempts": [{"status": a.status, "error": a.error, "duration_ms": a.duration_ms}
                         for a in t.attempts]}


def _step_dict(s: Step) -> dict[str, Any]:
    check = None if s.check is None else {
        "kind": s.check.kind, "passed": s.check.passed, "expected": s.check.expected}
    return {"index": s.index, "action": s.action, "title": s.title, "target": s.target,
            "anchors": list(s.anchors), "value": s.value, "observed": s.observed,
            "check": check, "error": s.error, "served_records": list(s.served_records),
            "scope": dict(s.scope), "artifacts": list(s.artifacts),
            "duration_ms": s.duration_ms}


# -- validation ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Violation:
    """One place where a run file breaks the format: its JSON path and a reason."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class RunEvidenceError(InvalidInputError):
    """A run file that cannot be read or breaks the format; carries every violation."""

    default_hint = "see docs/runs.md and docs/run-evidence.schema.json"

    def __init__(self, source: str, violations: Sequence[Violation], *,
                 hint: str | None = None) -> None:
        self.source = source
        self.violations = tuple(violations)
        shown = "; ".join(str(v) for v in self.violations[:MAX_MESSAGES])
        more = len(self.violations) - MAX_MESSAGES
        tail = f"; and {more} more" if more > 0 else ""
        n = len(self.violations)
        super().__init__(f"{source}: run evidence breaks the format in {n} "
                         f"place{'s' if n != 1 else ''}: {shown}{tail}", hint=hint)


def _json_path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=True)}]"
    return out or "(root)"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_WORDS = {"string": "a string", "integer": "a whole number", "boolean": "true or false",
               "object": "an object", "array": "a list", "null": "null",
               "number": "a number"}


def _reason(error: Any) -> tuple[list[str | int], str]:
    """The path and one-line reason of one jsonschema error, in memidex's words."""
    path: list[str | int] = list(error.absolute_path)
    keyword, schema, instance = error.validator, error.schema, error.instance
    if keyword == "required":
        missing = [k for k in error.validator_value if k not in instance][0]
        return [*path, missing], "is required"
    if keyword == "additionalProperties" and isinstance(instance, dict):
        known = set(schema.get("properties", {}))
        extra = sorted(k for k in instance if k not in known and not k.startswith("x-"))
        return [*path, extra[0]] if extra else path, (
            "is not a known key" if len(extra) <= 1 else
            f"is not a known key (nor {', '.join(extra[1:])})")
    if keyword == "type":
        kinds = error.validator_value
        kinds = kinds if isinstance(kinds, list) else [kinds]
        return path, (f"must be {' or '.join(_TYPE_WORDS[k] for k in kinds)}, got "
                      f"{_short(instance)}")
    if keyword == "pattern":
        what = schema.get("description", f"a string matching {error.validator_value}")
        return path, f"must be {what}, got {_short(instance)}"
    if keyword == "enum":
        words = ", ".join("null" if v is None else v for v in error.validator_value)
        return path, f"must be one of {words}, got {_short(instance)}"
    if keyword in ("minimum", "maximum"):
        word = "at least" if keyword == "minimum" else "at most"
        return path, f"must be {word} {error.validator_value}, got {_short(instance)}"
    if keyword == "maxLength":
        return path, f"is longer than {error.validator_value} characters"
    if keyword in ("maxItems", "maxProperties"):
        return path, f"has more than {error.validator_value} items"
    if keyword == "minItems":
        return path, f"must have at least {error.validator_value} item(s)"
    return path, str(error.message)[:200]  # pragma: no cover - a keyword we do not use


def _anchors(node: Mapping[str, Any], key: str) -> Iterator[tuple[str, Any]]:
    value = node.get(key)
    if key == "target":
        yield key, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield f"{key}[{i}]", item


def _code_checks(data: Any) -> Iterator[Violation]:
    """What a JSON Schema pattern cannot say exactly (its ``$`` also matches before a
    final newline) and what no schema keyword says: full matches, artifact paths that
    stay inside ``artifacts/``, unique test ids and step indices."""
    if not isinstance(data, dict):
        return
    for key, regex in (("run_id", _RUN_ID_RE), ("product", PRODUCT_RE),
                       ("build_tag", _BUILD_TAG_RE)):
        value = data.get(key)
        if isinstance(value, str) and not regex.fullmatch(value):
            yield Violation(key, f"must not hold a line break or edge spaces, got "
                                 f"{_short(value)}")
    tests = data.get("tests")
    if not isinstance(tests, list):
        return
    seen_tests: dict[str, int] = {}
    for t, test in enumerate(tests):
        if not isinstance(test, dict):
            continue
        where = f"tests[{t}]"
        test_id = test.get("test_id")
        if isinstance(test_id, str):
            if not _TEST_ID_RE.fullmatch(test_id):
                yield Violation(f"{where}.test_id", "must not hold a line break")
            elif test_id in seen_tests:
                yield Violation(f"{where}.test_id", f"repeats tests[{seen_tests[test_id]}]"
                                                    f" ({_short(test_id)})")
            else:
                seen_tests[test_id] = t
        yield from _node_checks(test, where)
        steps = test.get("steps")
        if not isinstance(steps, list):
            continue
        seen_steps: dict[int, int] = {}
        for s, step in enumerate(steps):
            if not isinstance(step, dict):
                continue
            at = f"{where}.steps[{s}]"
            index = step.get("index")
            if isinstance(index, float) and index.is_integer():
                index = int(index)
            if isinstance(index, int) and not isinstance(index, bool):
                if index in seen_steps:
                    yield Violation(f"{at}.index", f"repeats steps[{seen_steps[index]}] "
                                                   f"(index {index})")
                else:
                    seen_steps[index] = s
            yield from _node_checks(step, at)


def _node_checks(node: Mapping[str, Any], where: str) -> Iterator[Violation]:
    for key in ("target", "anchors"):
        for sub, value in _anchors(node, key):
            if isinstance(value, str) and not ANCHOR_RE.fullmatch(value):
                yield Violation(f"{where}.{sub}", f"must be an anchor, type:value on one "
                                                  f"line, got {_short(value)}")
    artifacts = node.get("artifacts")
    if isinstance(artifacts, list):
        for i, value in enumerate(artifacts):
            if isinstance(value, str):
                reason = artifact_problem(value)
                if reason:
                    yield Violation(f"{where}.artifacts[{i}]", reason)


def artifact_problem(value: str) -> str | None:
    """Why ``value`` is not a safe artifact path (relative, inside ``artifacts/``), or
    ``None`` when it is."""
    path = PurePosixPath(value)
    if value.startswith("/") or "\\" in value or re.match(r"[A-Za-z]:", value):
        return f"must be a relative path, got {_short(value)}"
    if any(part in ("..", ".") for part in value.split("/")):
        return f"must not contain `..` or `.` parts, got {_short(value)}"
    if path.parts[:1] != ("artifacts",) or len(path.parts) < 2 or "//" in value \
            or value.endswith("/"):
        return f"must be a path inside artifacts/, got {_short(value)}"
    if not _ARTIFACT_RE.fullmatch(value):
        return (f"must use letters, digits and `._@+=-` in each part, got "
                f"{_short(value)}")
    return None


def validate_run(data: Any) -> list[Violation]:
    """Every violation of the run format in ``data`` (parsed JSON), sorted by path."""
    # lazy: only commands that read runs pay for it (jsonschema ships no type hints)
    jsonschema: Any = importlib.import_module("jsonschema")

    validator = jsonschema.Draft202012Validator(run_schema())
    found: dict[tuple[str, str], Violation] = {}
    for error in validator.iter_errors(data):
        parts, reason = _reason(error)
        v = Violation(_json_path(parts), reason)
        found.setdefault((v.path, v.reason), v)
    schema_paths = {v.path for v in found.values()}
    for v in _code_checks(data):
        if v.path not in schema_paths:  # one reason per place is enough
            found.setdefault((v.path, v.reason), v)
    return sorted(found.values(), key=lambda v: (_sort_key(v.path), v.reason))


def _sort_key(path: str) -> list[tuple[int, int | str]]:
    out: list[tuple[int, int | str]] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        out.append((1, int(index)) if index else (0, name))
    return out


# -- loading ------------------------------------------------------------------------------

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


def read_run_bytes(path: Path, *, max_bytes: int = MAX_RUN_BYTES) -> bytes:
    """The bytes of the run file ``path``; a file of ``max_bytes`` or more is refused from
    its size alone, before anything is read."""
    source = str(path)
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
        flaky=bool(t.get("flaky")),
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
                                               expected=check.get("expected")),
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


if __name__ == "__main__":  # pragma: no cover - regenerates the published schema
    print(schema_text(), end="")
