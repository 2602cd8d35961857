"""What every typer command module shares: the ``app`` and ``knowledge`` groups, the
``--root`` state and the common options. :mod:`memidex.cli.commands` and
:mod:`memidex.cli.curate` register their commands on these.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memidex._version import __version__
from memidex.cli.fast import open_memidex

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["STATE", "AllProductsOpt", "AnchorOpt", "IdArg", "JsonOpt", "KindOpt", "ProductOpt",
           "WaitOpt", "app", "knowledge", "memidex"]

app = typer.Typer(
    name="memidex",
    help="A git-native knowledge store for AI testing agents: committed records learned "
    "from test runs (runs ingest), a brief for each test (brief), a derived SQLite index, "
    "search and health checks. Records live in "
    "agent-qa-knowledge/memory/records/; the index is derived and always safe to delete. "
    "With --json every command prints one JSON object on stdout (docs/schemas/); an error "
    "prints {\"error\": {code, message, hint, exit_code}} there as well as one error: line "
    "on stderr.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, pwsh)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
knowledge = typer.Typer(
    help="Records: search, show, list, check, add, curate (confirm, supersede, deprecate, "
    "quarantine, release, purge), what runs taught (diff, proposals, rollback), review a "
    "branch and rebuild the index.",
    no_args_is_help=True,
)
app.add_typer(knowledge, name="knowledge")


class _State:
    root: Path | None = None


STATE = _State()

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
ProductOpt = Annotated[
    str | None,
    typer.Option("--product", "-p", help="Product to scope to (default: `product` in "
                 "memidex.toml)."),
]
AllProductsOpt = Annotated[
    bool, typer.Option("--all-products", help="Every product instead of one (explicitly "
                       "unscoped).")
]
KindOpt = Annotated[
    list[str] | None,
    typer.Option("--kind", "-k", help="Only this kind (fact, caution, procedure, unknown); "
                 "repeatable."),
]
AnchorOpt = Annotated[
    list[str] | None,
    typer.Option("--anchor", "-a", help="Only records with this anchor (type:value; a "
                 "trailing * matches a prefix); repeatable."),
]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="A record id or a unique prefix "
                                      "of one.")]
WaitOpt = Annotated[
    float,
    typer.Option("--wait", min=0, help="Seconds to wait for the writer lease (or for a "
                 "running daemon to apply the change) before giving up with exit 3."),
]


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"memidex {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Repository root (default: walk up to memidex.toml, "
                     "else the git top level).", envvar=None),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True,
                           help="Print the version and exit.")
    ] = False,
) -> None:
    STATE.root = root


def memidex(*, reading: bool = False, wait: float = 10.0,
            strict_config: bool = True) -> Memidex:
    """The facade for this command (see :func:`memidex.cli.fast.open_memidex`)."""
    return open_memidex(STATE.root, reading=reading, wait=wait, strict_config=strict_config)
