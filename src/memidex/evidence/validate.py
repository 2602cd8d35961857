"""Validating run evidence: the JSON Schema plus the checks a pattern cannot make; every
violation reported with its JSON path.

Two validators of the one schema (:func:`memidex.evidence.schema.run_schema`). The fast
one (:func:`conforms`) compiles the schema's keywords into plain Python checks — a run
that conforms costs one walk, no ``jsonschema`` import (~0.1 s) and no validator object
per node (jsonschema spent ~9 s on a 40 MB report's run). The reference is
``jsonschema`` (imported lazily): whenever the fast check says no, it names every
violation. A property test holds the two to the same answer on generated runs."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from memidex.errors import InvalidInputError
from memidex.evidence.schema import (
    ARTIFACT_PATTERN,
    BUILD_TAG_PATTERN,
    MAX_MESSAGES,
    RUN_ID_PATTERN,
    TEST_ID_PATTERN,
    run_schema,
)
from memidex.plain import Frozen, set_field
from memidex.records.ids import ANCHOR_RE, PRODUCT_RE

__all__ = ["RunEvidenceError", "Violation", "artifact_problem", "conforms",
           "reference_violations", "validate_run"]


_ARTIFACT_RE = re.compile(ARTIFACT_PATTERN[1:-1])
_RUN_ID_RE = re.compile(RUN_ID_PATTERN[1:-1])
_BUILD_TAG_RE = re.compile(BUILD_TAG_PATTERN[1:-1])
_TEST_ID_RE = re.compile(TEST_ID_PATTERN[1:-1])


class Violation(Frozen):
    """One place where a run file breaks the format: its JSON path and a reason."""

    path: str
    reason: str

    __slots__ = ("path", "reason")

    def __init__(self, path: str, reason: str) -> None:
        set_field(self, "path", path)
        set_field(self, "reason", reason)

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


# -- the fast validator: the schema compiled into checks ---------------------------------

Check = Callable[[Any], bool]
_TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (
        isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
_PY_TYPES: dict[str, type] = {"string": str, "boolean": bool, "null": type(None),
                              "array": list, "object": dict, "integer": int, "number": int}
_IGNORED = ("$schema", "$id", "title", "description", "$defs")
_KNOWN = {*_IGNORED, "type", "required", "properties", "additionalProperties",
          "patternProperties", "items", "minItems", "maxItems", "maxLength", "pattern",
          "enum", "minimum", "maximum", "maxProperties", "propertyNames", "$ref"}
_is_number = _TYPES["number"]


def _true(_v: Any) -> bool:
    return True


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _true
    if len(checks) == 1:
        return checks[0]

    def every(v: Any) -> bool:
        for c in checks:
            if not c(v):
                return False
        return True

    return every


def _type_check(kinds: list[str]) -> Check:
    """``type``: the exact Python types first (one set lookup), jsonschema's rule (a
    subclass, a float holding a whole number, ``bool`` not an integer) after."""
    exact = {_PY_TYPES[k] for k in kinds}
    slow = [_TYPES[k] for k in kinds]
    floats = "number" in kinds or "integer" in kinds

    def check(v: Any) -> bool:
        t = type(v)
        if t in exact:
            return True
        if t is bool or (t is float and not floats):
            return False
        return any(test(v) for test in slow)

    return check


def _compile(node: Mapping[str, Any], defs: Mapping[str, Any],
             done: dict[str, list[Check]]) -> Check:
    """One schema node as a check, with jsonschema's meaning of each keyword (draft
    2020-12: a keyword about strings passes anything that is not a string, and so on).
    A keyword it does not know is an error here, never a check left out."""
    unknown = set(node) - _KNOWN
    if unknown:
        raise ValueError(f"the fast validator does not know {sorted(unknown)}")
    checks: list[Check] = []
    if "$ref" in node:
        name = str(node["$ref"]).removeprefix("#/$defs/")
        if name not in done:
            cell: list[Check] = [_true]  # a placeholder while the definition compiles
            done[name] = cell
            cell[0] = _compile(defs[name], defs, done)
        cell = done[name]
        checks.append(cell[0] if cell[0] is not _true else (lambda v: cell[0](v)))
    if "type" in node:
        checks.append(_type_check(node["type"] if isinstance(node["type"], list)
                                  else [node["type"]]))
    if "enum" in node:
        allowed = list(node["enum"])
        checks.append(lambda v: any(_enum_equal(v, a) for a in allowed))
    if "maxLength" in node or "pattern" in node:
        most = node.get("maxLength")
        search = re.compile(node["pattern"]).search if "pattern" in node else None

        def string(v: Any) -> bool:
            if not isinstance(v, str):
                return True
            if most is not None and len(v) > most:
                return False
            return search is None or search(v) is not None

        checks.append(string)
    if "minimum" in node or "maximum" in node:
        low, high = node.get("minimum"), node.get("maximum")

        def number(v: Any) -> bool:
            if not _is_number(v):
                return True
            return not ((low is not None and v < low) or (high is not None and v > high))

        checks.append(number)
    if "items" in node or "minItems" in node or "maxItems" in node:
        item = _compile(node["items"], defs, done) if "items" in node else None
        fewest, most_items = node.get("minItems"), node.get("maxItems")

        def array(v: Any) -> bool:
            if not isinstance(v, list):
                return True
            if (fewest is not None and len(v) < fewest) or (
                    most_items is not None and len(v) > most_items):
                return False
            if item is not None:
                for x in v:
                    if not item(x):
                        return False
            return True

        checks.append(array)
    object_keys = {"required", "properties", "additionalProperties", "patternProperties",
                   "maxProperties", "propertyNames"}
    if object_keys & set(node):
        checks.append(_object_check(node, defs, done))
    return _all(checks)


def _object_check(node: Mapping[str, Any], defs: Mapping[str, Any],
                  done: dict[str, list[Check]]) -> Check:
    required = tuple(node.get("required", ()))
    props = {k: _compile(sub, defs, done) for k, sub in node.get("properties", {}).items()}
    patterns = [(re.compile(k).search, _compile(sub, defs, done))
                for k, sub in node.get("patternProperties", {}).items()]
    extra = node.get("additionalProperties", True)
    extra_check = _compile(extra, defs, done) if isinstance(extra, dict) else None
    most = node.get("maxProperties")
    names = _compile(node["propertyNames"], defs, done) if "propertyNames" in node else None

    def obj(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        if most is not None and len(v) > most:
            return False
        for key in required:
            if key not in v:
                return False
        for key, value in v.items():
            if type(key) is not str:
                return False  # not JSON: the reference says what it makes of it
            if names is not None and not names(key):
                return False
            check = props.get(key)
            matched = False
            if patterns:
                for search, sub in patterns:
                    if search(key) is not None:
                        matched = True
                        if not sub(value):
                            return False
            if check is not None:
                if not check(value):
                    return False
            elif not matched:
                if extra is False or (extra_check is not None and not extra_check(value)):
                    return False
        return True

    return obj


def _enum_equal(value: Any, allowed: Any) -> bool:
    """jsonschema's equality for ``enum`` (``True`` is not ``1``)."""
    if isinstance(value, bool) or isinstance(allowed, bool):
        return value is allowed
    return bool(value == allowed) and type(value) is not dict and type(value) is not list


_FAST: list[Check] = []


def conforms(data: Any) -> bool:
    """Whether ``data`` conforms to the run schema (the fast validator: see the module
    doc). ``False`` says only that the reference must look."""
    if not _FAST:
        schema = run_schema()
        _FAST.append(_compile(schema, schema["$defs"], {}))
    try:
        return _FAST[0](data)
    except RecursionError:  # nested past the schema's depth: the reference says where
        return False


def validate_run(data: Any) -> list[Violation]:
    """Every violation of the run format in ``data`` (parsed JSON), sorted by path: none
    for a run the fast validator accepts, else jsonschema's and the code checks'."""
    if conforms(data) and next(_code_checks(data), None) is None:
        return []
    return reference_violations(data)


def reference_violations(data: Any) -> list[Violation]:
    """:func:`validate_run` by the reference alone (jsonschema, then the code checks)."""
    # lazy: only a run that breaks the format pays for it (jsonschema ships no type hints)
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
