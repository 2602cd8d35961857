"""The MCP tools of ``memidex mcp``: the table of tools, and how one is run on the facade
(no MCP SDK here; :mod:`memidex.mcpserver.server` serves these).

Each tool's answer is the object the matching CLI command prints with ``--json`` — the
same facade call, the same dictionary — and its output schema is that command's result
schema from ``docs/schemas/`` (``output_schemas.json``; a test holds the two equal). The
tools are named after what they touch (``knowledge_search``, ``runs_show``,
``proposals_accept``); the names of the first release (``search``, ``show``, ``list``,
``diff``, ``confirm``, ``quarantine``, ``proposals``) are still answered, unlisted
(:data:`ALIASES`). An error never escapes :func:`run_tool`: a :class:`MemidexError` (or
anything else) becomes a :class:`ToolError` whose texts name the tool's arguments, not
the CLI's flags (:mod:`memidex.mcpserver.wording`).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from memidex.errors import EXIT_PROBLEMS, EXIT_USAGE, MemidexError, UsageError, from_os_error
from memidex.mcpserver.reading_tools import READING
from memidex.mcpserver.spec import ToolAnswer, ToolError, ToolSpec
from memidex.mcpserver.wording import for_mcp, shorten
from memidex.mcpserver.writing_tools import WRITING, run_file

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["ALIASES", "TOOLS", "ToolAnswer", "ToolError", "ToolSpec", "error_of",
           "policies", "resolve", "run_file", "run_tool", "warm"]

TOOLS: dict[str, ToolSpec] = {t.name: t for t in (*READING, *WRITING)}
ALIASES = {"search": "knowledge_search", "show": "knowledge_show", "list": "knowledge_list",
           "diff": "knowledge_diff", "confirm": "knowledge_confirm",
           "quarantine": "knowledge_quarantine", "proposals": "proposals_list"}
"""The first release's tool names, answered (not listed) for one more release."""


def resolve(name: str) -> ToolSpec | None:
    """The tool ``name`` (or an alias of it) names, None for no tool."""
    return TOOLS.get(ALIASES.get(name, name))


@cache
def _validator(name: str) -> Any:
    import importlib

    jsonschema: Any = importlib.import_module("jsonschema")  # ships no type hints
    return jsonschema.Draft202012Validator(TOOLS[name].input_schema)


def _arguments_error(spec: ToolSpec, arguments: Mapping[str, Any]) -> UsageError | None:
    """The first way ``arguments`` break the tool's input schema, as a usage error
    (a long value is not echoed whole)."""
    error = next(iter(_validator(spec.name).iter_errors(dict(arguments))), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    message = error.message
    shown = repr(error.instance)
    if len(shown) > 80:
        message = message.replace(shown, f"{shown[:40]}… ({len(shown):,} characters)")
    return UsageError(f"{spec.name}: {where + ': ' if where else ''}{message}",
                      hint=f"see the input schema of the `{spec.name}` tool")


def _error(code: str, message: str, hint: str, exit_code: int) -> ToolError:
    message, hint = for_mcp(message), for_mcp(hint or "")
    text = f"error: {message}" + (f"\nhint: {hint}" if hint else "")
    return ToolError({"error": {"code": code, "message": message, "hint": hint or None,
                                "exit_code": exit_code}}, text)


def error_of(exc: BaseException) -> ToolError:
    """A tool error for ``exc``: a :class:`MemidexError` as the CLI reports it (in the
    tools' words); an ``OSError`` as a storage error; anything else as an internal error
    (its traceback on the server's stderr)."""
    if isinstance(exc, OSError):
        exc = from_os_error(exc)  # the same fault, the same error as on the CLI
    if isinstance(exc, MemidexError):
        return _error(type(exc).__name__, exc.message, exc.hint, exc.exit_code)
    traceback.print_exception(exc, file=sys.stderr)
    return _error("InternalError", f"{type(exc).__name__}: {exc}",
                  "a bug in memidex (details on the server's stderr); the server keeps "
                  "running", EXIT_PROBLEMS)


def run_tool(m: Memidex, name: str, arguments: Mapping[str, Any] | None
             ) -> ToolAnswer | ToolError:
    """Run tool ``name`` on the facade; never raises (but for ``BaseException``s such as
    a cancellation)."""
    spec = resolve(name)
    if spec is None:
        return _error("UsageError", f"unknown tool {shorten(repr(name), 100)}",
                      f"the tools are {', '.join(TOOLS)}", EXIT_USAGE)
    args = dict(arguments or {})
    problem = _arguments_error(spec, args)
    if problem is not None:
        return error_of(problem)
    try:
        return spec.call(m, args)
    except Exception as exc:  # every error is a tool error, never a crashed server
        return error_of(exc)


def warm(m: Memidex) -> None:
    """What the first requests would otherwise pay: the index opened and brought up to
    date, the brief's modules imported, the argument validators built. A problem here is
    left for the first request to report."""
    import contextlib

    with contextlib.suppress(MemidexError, OSError):
        m.reading.open()
    import memidex.serve.brief  # noqa: F401
    import memidex.serve.render  # noqa: F401

    for name in TOOLS:
        _validator(name)


# --- resources ------------------------------------------------------------------------

def policies(m: Memidex) -> list[dict[str, Any]]:
    """Every policy that parses, secrets masked: ``{id, rule, severity, products,
    anchors, path, line}``, in file order."""
    from memidex.masking import Masker, secrets_path

    masker = Masker.load(secrets_path(m.config))
    files, _problems = m.store.load_policies()
    out: list[dict[str, Any]] = []
    for _fs, _sha, items in files:
        for p in items:
            out.append({"id": p.id, "rule": masker.mask_secrets(p.rule),
                        "severity": p.severity, "products": list(p.products),
                        "anchors": [masker.mask_secrets(a) for a in p.anchors],
                        "path": p.path, "line": p.line})
    return out
