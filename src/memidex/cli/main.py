"""The ``memidex`` entry point, and the one place that turns an error into an exit code.

A reading command (and ``runs ingest``) is first offered to a warm server, a running
``memidex daemon`` that answers it with the same bytes (:mod:`memidex.warm`). When none
answers a search, a brief or doctor, git's look at the records starts next
(:func:`early_git`), so that it runs while the rest is imported. A plain
``knowledge search`` or ``knowledge rebuild-index`` runs through
:mod:`memidex.cli.fast` without importing typer or rich; every other command line goes
to the typer application in :mod:`memidex.cli.commands`. Either way each
:class:`MemidexError` becomes one ``error:`` line (and a ``hint:`` line) on stderr and
its own exit code — here only. With ``--json`` (or ``--format json``) the error is also
printed on stdout as one object, ``{"error": {"code", "message", "hint", "exit_code"}}``
(``docs/schemas/error.schema.json``), unless the command already printed its report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # not `typing`'s, nor memidex.errors at the top: a warm command
if TYPE_CHECKING:      # imports neither (~15 ms)
    from typing import Any

    from memidex.errors import MemidexError

__all__ = ["EARLY_COMMANDS", "NO_COLLECTOR", "early_git", "main", "run", "wants_json"]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly). A real command
    line (``argv`` None) is first offered to a warm server (:mod:`memidex.warm.client`);
    when none answers, it runs here."""
    if argv is None:
        from memidex.warm.client import run_warm

        code = run_warm(sys.argv[1:])
        if code is not None:
            return code
        # git's look (a reading command's) runs while the rest is imported
        if early_git(sys.argv[1:]) in NO_COLLECTOR:
            import gc

            # a one-shot reading command or ingest: the collector's passes visit objects
            # that nearly all live to the exit: ~20 during the imports (>= 3 ms of CPU),
            # and after an ingest one over all it made (~8 ms for 475 records)
            gc.disable()
    from memidex.cli.fast import parse_fast, run_fast

    args_list = sys.argv[1:] if argv is None else argv
    json_out = wants_json(args_list)
    if json_out:
        from memidex.cli import render

        render.reset()
    args = parse_fast(args_list)
    if args is not None:
        return _mapped(lambda: run_fast(args), json_out)
    return _mapped(lambda: _typer(argv, json_out=json_out), json_out)


EARLY_COMMANDS = (("knowledge", "search"), ("brief",), ("doctor",))
"""The commands :func:`early_git` starts git for: those whose staleness check collects it."""


NO_COLLECTOR = (*EARLY_COMMANDS, ("runs", "ingest"))
"""The one-shot commands that run without the cyclic collector (see :func:`main`)."""


def early_git(argv: Sequence[str]) -> tuple[str, ...] | None:
    """For a command line of :data:`EARLY_COMMANDS`, start the staleness check's git
    calls (:mod:`memidex.index.prefetch`) for the repository and folders it reads, as far
    as the command line and ``memidex.toml`` tell them without importing the
    configuration: a wrong guess costs only the call. The command's words, for a command
    line in the plain spellings (:func:`memidex.warm.client.command_of`); else None."""
    from memidex.warm.client import command_of

    parsed = command_of(argv)
    if parsed is None or parsed[1] not in EARLY_COMMANDS:
        return None if parsed is None else parsed[1]
    from memidex.index.prefetch import prefetch, tops_of
    from memidex.warm.client import find_root

    try:
        root = find_root(parsed[0])
        tops = None if root is None else tops_of(root)
        if root is not None and tops is not None:
            prefetch(root, tops)
    except (OSError, ValueError):  # only a head start: the command reports what is wrong
        pass
    return parsed[1]


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json``, ``--format json``, ``-f json``),
    read before parsing so a usage error can answer in JSON too."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return False
        if arg == "--json" or arg == "--format=json":
            return True
        if arg in ("--format", "-f") and argv[i + 1 : i + 2] == ["json"]:
            return True
    return False


def _typer(argv: list[str] | None, *, json_out: bool | None = None) -> int | None:
    """Run the typer application. ``json_out=None``: click's standalone mode (it prints a
    usage error and exits 2 itself); else the same, plus the JSON error object."""
    from memidex.cli import warmserve
    from memidex.cli.commands import STATE

    warmserve.RUN_COMMAND[0] = main  # a daemon serves commands warm through this
    STATE.root = None
    app = _application()
    if json_out is None:
        app(args=argv, prog_name="memidex", standalone_mode=True)
        return None
    import typer

    # click's ClickException, whichever click typer uses (recent typers vendor it)
    click_error: type[Exception] = next(c for c in typer.BadParameter.__mro__
                                        if c.__name__ == "ClickException")
    try:
        code = app(args=argv, prog_name="memidex", standalone_mode=False)
    except click_error as exc:  # a usage error found by the parser
        usage: Any = exc
        if type(exc).__name__ == "NoArgsIsHelpError":  # `memidex` alone: the help
            usage.show()
            return int(usage.exit_code)
        ctx = getattr(usage, "ctx", None)
        hint = f"see `{ctx.command_path if ctx is not None else 'memidex'} --help`"
        hint = _misplaced(usage.format_message(), argv) or hint
        _report(json_out, "UsageError", usage.format_message(), hint, usage.exit_code)
        return int(usage.exit_code)
    except typer.Abort:
        from memidex.errors import EXIT_PROBLEMS

        sys.stderr.write("Aborted!\n")
        return EXIT_PROBLEMS
    return code if isinstance(code, int) else None


_APPLICATION: list[Callable[..., Any]] = []


def _application() -> Callable[..., Any]:
    """The typer application as click runs it, built once a process: building it reads
    every command's options from its signature (~30 ms), and a warm server runs many
    commands. (What typer's own ``app()`` adds is its exception hook, which
    ``pretty_exceptions_enable=False`` makes the standard one.)"""
    if not _APPLICATION:
        import typer.main

        from memidex.cli.commands import app

        _APPLICATION.append(typer.main.get_command(app))
    return _APPLICATION[0]


_KNOWLEDGE = ("search", "show", "list", "check", "add", "confirm", "supersede", "deprecate",
              "quarantine", "release", "purge", "diff", "rollback", "proposals", "review",
              "rebuild-index")


def _misplaced(message: str, argv: Sequence[str] | None) -> str | None:
    """A hint for ``memidex search …`` (a ``knowledge`` command given at the top):
    ``did you mean `memidex knowledge search`?``."""
    import re

    m = re.match(r"No such command '([^']+)'", message)
    if m is None:
        return None
    word = m.group(1)
    if word in _KNOWLEDGE:
        return f"did you mean `memidex knowledge {word}`?"
    if word in ("ingest", "import"):
        return f"did you mean `memidex runs {word}`?"
    return None


def _mapped(command: Callable[[], int | None], json_out: bool = False) -> int:
    """Run ``command``; usage errors are click's (exit 2), the rest are mapped here."""
    from memidex.errors import EXIT_INTERRUPTED, EXIT_PROBLEMS, EXIT_USAGE, MemidexError

    try:
        return command() or 0
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    except MemidexError as exc:
        sys.stdout.flush()
        return _report_error(exc, json_out)
    except BrokenPipeError:
        return EXIT_PROBLEMS
    except KeyboardInterrupt:  # Ctrl-C: what was being written is left as it was
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except OSError as exc:  # disk full, I/O error, permissions: one line, no traceback
        from memidex.errors import from_os_error

        return _report_error(from_os_error(exc), json_out)


def _report_error(exc: MemidexError, json_out: bool) -> int:
    """``exc`` reported (:func:`_report`; a :class:`ProblemsFound`'s hint only in the
    JSON: its report is above); its exit code."""
    from memidex.errors import ProblemsFound

    _report(json_out, type(exc).__name__, exc.message, exc.hint, exc.exit_code,
            show_hint=not isinstance(exc, ProblemsFound))
    return exc.exit_code


def _report(json_out: bool, code: str, message: str, hint: str, exit_code: int, *,
            show_hint: bool = True) -> None:
    """One ``error:`` line (and a ``hint:`` line) on stderr, and with ``--json`` the
    error object on stdout (:func:`_json_error`)."""
    from memidex.cli.plain import safe  # a message may quote a file name or a title

    message, hint = _topics(message), _topics(hint or "")
    line = f"error: {safe(message)}"
    if hint and show_hint:
        line += f"\nhint: {safe(hint)}"
    sys.stderr.write(line + "\n")
    _json_error(json_out, code, message, hint, exit_code)


def _topics(text: str) -> str:
    """``docs/NAME.md`` (a file of memidex's source, not of the user's repository) as
    ```memidex help NAME```, which prints the same page wherever memidex is installed."""
    if "docs/" not in text:
        return text
    from memidex.mcpserver.wording import docs_as_help

    return docs_as_help(text)


def _json_error(json_out: bool, code: str, message: str, hint: str, exit_code: int) -> None:
    """The error as one JSON object on stdout — unless the command already printed its
    JSON report there (``doctor`` and ``check`` report, then exit 1)."""
    from memidex.cli import render

    if not json_out or render.printed_json():
        return
    error: dict[str, Any] = {"code": code, "message": message, "hint": hint or None,
                             "exit_code": exit_code}
    try:
        render.print_json({"error": error})
        sys.stdout.flush()
    except OSError:
        pass


def run() -> None:
    code = main()
    import gc

    gc.freeze()  # the process ends now: its last collection need not visit every object
    sys.exit(code)
