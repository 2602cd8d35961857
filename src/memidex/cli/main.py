"""The ``memidex`` entry point, and the one place that turns an error into an exit code.

A plain ``knowledge search`` or ``knowledge rebuild-index`` runs through
:mod:`memidex.cli.fast` without importing typer or rich; every other command line goes
to the typer application in :mod:`memidex.cli.commands`. Either way each
:class:`MemidexError` becomes one ``error:`` line (and a ``hint:`` line) on stderr and
its own exit code — here only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from memidex.errors import EXIT_PROBLEMS, EXIT_USAGE, MemidexError, ProblemsFound

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    from memidex.cli.fast import parse_fast, run_fast

    args = parse_fast(sys.argv[1:] if argv is None else argv)
    if args is not None:
        return _mapped(lambda: run_fast(args))
    return _mapped(lambda: _typer(argv))


def _typer(argv: list[str] | None) -> None:
    from memidex.cli.commands import STATE, app

    STATE.root = None
    app(args=argv, prog_name="memidex", standalone_mode=True)


def _mapped(command: Callable[[], None]) -> int:
    """Run ``command``; usage errors are click's (exit 2), the rest are mapped here."""
    try:
        command()
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    except MemidexError as exc:
        sys.stdout.flush()
        line = f"error: {exc.message}"
        if exc.hint and not isinstance(exc, ProblemsFound):
            line += f"\nhint: {exc.hint}"
        sys.stderr.write(line + "\n")
        return exc.exit_code
    except BrokenPipeError:
        return EXIT_PROBLEMS
    except OSError as exc:  # disk full, I/O error, permissions: one line, no traceback
        from memidex.errors import StorageError

        err = StorageError(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename
                                                        else ""))
        sys.stderr.write(f"error: {err.message}\nhint: {err.hint}\n")
        return err.exit_code
    return 0


def run() -> None:
    sys.exit(main())
