"""Error texts for an MCP client: the facade's messages speak of CLI flags and commands
(``--product``, ```memidex runs list```); over MCP they name the tool's arguments and
tools instead, and never echo a long argument whole."""

from __future__ import annotations

import re

__all__ = ["MAX_MESSAGE", "docs_as_help", "for_mcp", "shorten"]

MAX_MESSAGE = 600
"""The longest message or hint a tool error carries (characters)."""
_LONG = 80  # a quoted value or a word longer than this is cut

_FLAGS = {"--anchor": "anchors", "--kind": "kinds", "--status": "statuses",
          "--no-record": "record: false", "--run-ordinal": "run_ordinal",
          "--body-file": "body", "--format": "format"}
"""CLI flags whose argument has another name (the rest: ``--build-tag`` -> ``build_tag``)."""
_SERVER_FLAGS = ("--root", "--wait")  # `memidex mcp`'s own options: kept, as the server's
_COMMANDS = {
    "knowledge search": "knowledge_search", "knowledge show": "knowledge_show",
    "knowledge list": "knowledge_list", "knowledge diff": "knowledge_diff",
    "knowledge check": "knowledge_check", "knowledge review": "knowledge_review",
    "knowledge add": "knowledge_add", "knowledge confirm": "knowledge_confirm",
    "knowledge quarantine": "knowledge_quarantine", "knowledge release": "knowledge_release",
    "knowledge deprecate": "knowledge_deprecate", "knowledge supersede": "knowledge_supersede",
    "knowledge rollback": "knowledge_rollback",
    "knowledge proposals accept": "proposals_accept",
    "knowledge proposals reject": "proposals_reject",
    "knowledge proposals show": "proposals_show", "knowledge proposals": "proposals_list",
    "runs ingest": "runs_ingest", "runs list": "runs_list", "runs show": "runs_show",
    "notes add": "note_add", "notes list": "notes", "doctor": "doctor", "brief": "brief",
}
_COMMAND_RE = re.compile(r"`memidex ((?:[a-z-]+ ?)+)[^`]*`")
_FLAG_RE = re.compile(r"(?<![\w-])--([a-z][a-z-]*)")
_QUOTED_RE = re.compile("'[^']{%s,}'|\"[^\"]{%s,}\"".replace("%s", str(_LONG)))
_WORD_RE = re.compile(r"\S{" + str(_LONG * 2) + ",}")


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` with every long quoted value or word cut to its start and its length,
    and at most ``limit`` characters in all."""
    def cut(m: re.Match[str]) -> str:
        value = m.group(0)
        return f"{value[:_LONG // 2]}… ({len(value):,} characters)"

    text = _WORD_RE.sub(cut, _QUOTED_RE.sub(cut, text))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _command(m: re.Match[str]) -> str:
    words = m.group(1).strip()
    for command, tool in sorted(_COMMANDS.items(), key=lambda kv: -len(kv[0])):
        if words == command or words.startswith(command + " "):
            return f"the `{tool}` tool"
    return m.group(0)  # a command for a person (rebuild-index, init): kept


def _flag(m: re.Match[str]) -> str:
    flag = "--" + m.group(1)
    if flag in _SERVER_FLAGS:
        return f"the server's `{flag}`"
    if flag == "--help":
        return "the tool's input schema"
    return f"`{_FLAGS.get(flag, m.group(1).replace('-', '_'))}`"


_DOC_RE = re.compile(r"docs/([a-z0-9-]+)\.(?:md|schema\.json)(?:#[a-z0-9-]+)?")


def docs_as_help(text: str) -> str:
    """``docs/NAME.md`` — a file of memidex's source checkout, not of the user's
    repository — as ```memidex help NAME```, which prints the same page wherever memidex
    is installed (the CLI's and the MCP server's messages alike)."""
    if "docs/" not in text:
        return text
    return _DOC_RE.sub(lambda m: f"`memidex help {m.group(1)}`", text)


def for_mcp(text: str) -> str:
    """A facade message as an MCP client should read it (see the module doc)."""
    if not text:
        return text
    text = _COMMAND_RE.sub(_command, docs_as_help(text))
    return shorten(_FLAG_RE.sub(_flag, text))
