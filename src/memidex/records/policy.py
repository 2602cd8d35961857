"""Policies: rules people wrote in ``policies/*.yaml``. Never learned, never rewritten.

A file holds one policy (a mapping) or several (a list of mappings)::

    id: no-real-cards
    rule: Only use the test card 4242 4242 4242 4242
    applies_to: {products: [shop-web], anchors: ["page:/checkout*"]}
    severity: must
"""

from __future__ import annotations

from typing import Any

from memidex.errors import Problem, RecordError
from memidex.records.ids import ID_RE
from memidex.records.model import SEVERITIES, Policy
from memidex.records.yamlfast import one_line, yaml_loader

__all__ = ["parse_policies"]

_KEYS = {"id", "rule", "applies_to", "severity"}


def _node_lines(text: str) -> list[int]:
    """The 1-based line where each policy mapping starts (one entry per policy)."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml_loader())
    except yaml.YAMLError:
        return []
    if isinstance(node, yaml.MappingNode):
        return [node.start_mark.line + 1]
    if isinstance(node, yaml.SequenceNode):
        return [item.start_mark.line + 1 for item in node.value]
    return []


def _str_list(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(sorted(set(value)))
    return None


def _one(item: Any, path: str, line: int) -> Policy:
    def bad(reason: str) -> RecordError:
        return RecordError([Problem(path, line, reason)])

    if not isinstance(item, dict):
        raise bad("a policy must be a mapping with id, rule, applies_to and severity")
    unknown = sorted(set(map(str, item)) - _KEYS)
    if unknown:
        raise bad(f"unknown policy key `{unknown[0]}`")
    pid, rule = item.get("id"), item.get("rule")
    if not isinstance(pid, str) or not ID_RE.fullmatch(pid):
        raise bad("policy `id` must be lowercase letters, digits and '-'")
    if not isinstance(rule, str) or not rule.strip():
        raise bad(f"policy {pid}: `rule` must be a non-empty string")
    severity = item.get("severity", "must")
    if severity not in SEVERITIES:
        raise bad(f"policy {pid}: `severity` must be one of {', '.join(SEVERITIES)}")
    applies = item.get("applies_to") or {}
    if not isinstance(applies, dict) or set(map(str, applies)) - {"products", "anchors"}:
        raise bad(f"policy {pid}: `applies_to` may hold `products` and `anchors` lists")
    products, anchors = _str_list(applies.get("products")), _str_list(applies.get("anchors"))
    if products is None or anchors is None:
        raise bad(f"policy {pid}: `applies_to.products` and `.anchors` must be string lists")
    return Policy(id=pid, rule=rule.strip(), severity=severity, products=products,
                  anchors=anchors, path=path, line=line)


def parse_policies(data: bytes, path: str) -> list[Policy]:
    """Every policy in one file, or :class:`RecordError` naming the file and line."""
    import yaml

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RecordError([Problem(path, line, "not valid UTF-8")]) from None
    try:
        loaded = yaml.load(text, Loader=yaml_loader())  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise RecordError([Problem(path, line, f"YAML: {exc.problem or 'cannot parse'}")]) from None
    except yaml.YAMLError as exc:
        raise RecordError([Problem(path, 1, f"YAML: {one_line(exc)}")]) from None
    except (ValueError, RecursionError) as exc:  # 2024-13-45, a 5,000-digit int, deep nesting
        reason = f"YAML: cannot read a value: {one_line(exc)}"
        raise RecordError([Problem(path, 1, reason)]) from None
    if loaded is None:
        return []
    items = loaded if isinstance(loaded, list) else [loaded]
    lines = _node_lines(text)
    policies: list[Policy] = []
    problems: list[Problem] = []
    for i, item in enumerate(items):
        try:
            policies.append(_one(item, path, lines[i] if i < len(lines) else 1))
        except RecordError as exc:
            problems += exc.problems
    if problems:
        raise RecordError(problems)
    return policies
