"""What every typer command module shares: the ``app`` and ``knowledge`` groups, the
``--root`` state and the common options. :mod:`memidex.cli.commands` and
:mod:`memidex.cli.curate` register their commands on these.
"""


import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memidex._version import __version__
from memidex.cli import complete
from memidex.cli.fast import open_memidex

if TYPE_CHECKING:
    from memidex.app import Memidex

__all__ = ["STATE", "AllProductsOpt", "AnchorOpt", "IdArg", "JsonOpt", "KindOpt",
           "ListFormatOpt", "ProductOpt", "WaitOpt", "app", "knowledge", "memidex",
           "version_text"]

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
    context_settings={"help_option_names": ["-h", "--help"]},  # -h as git and gh take it
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
                 "memidex.toml).", autocompletion=complete.products),
]
AllProductsOpt = Annotated[
    bool, typer.Option("--all-products", help="Every product instead of one (explicitly "
                       "unscoped).")
]
KindOpt = Annotated[
    list[str] | None,
    typer.Option("--kind", "-k", help="Only this kind (fact, caution, procedure, unknown); "
                 "repeatable.", autocompletion=complete.kinds),
]
AnchorOpt = Annotated[
    list[str] | None,
    typer.Option("--anchor", "-a", help="Only records with this anchor (type:value; a "
                 "trailing * matches a prefix); repeatable."),
]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="A record id or a unique prefix "
                                      "of one.", autocompletion=complete.record_ids)]
ListFormatOpt = Annotated[
    str | None,
    typer.Option("--format", "-f", metavar="table|tsv|csv|json",
                 help="table (the default on a terminal), tsv (the default otherwise: a "
                 "header line, then one row a line), csv or json."),
]
WaitOpt = Annotated[
    float,
    typer.Option("--wait", min=0, help="Seconds to wait for the writer lease (or for a "
                 "running daemon to apply the change) before giving up with exit 3."),
]


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(version_text())
        raise typer.Exit()


def version_text() -> str:
    """``memidex --version``: the version, and where memidex runs from — the package's
    folder and the Python running it (an editable install, a pipx or uv tool
    environment, a CI job's venv)."""
    from pathlib import Path

    import memidex

    where = Path(memidex.__file__).resolve().parent
    return (f"memidex {__version__}\n"
            f"  from {where}\n"
            f"  python {sys.version.split()[0]} at {sys.executable}\n")


@app.callback()
def _root(
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Repository root (default: walk up to memidex.toml, "
                     "else the git top level).", envvar=None),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True,
                           help="Print the version, where memidex runs from, and exit.")
    ] = False,
    color: Annotated[
        str, typer.Option("--color", metavar="auto|always|never",
                          help="Colour: auto (a terminal, unless NO_COLOR; always with "
                          "FORCE_COLOR or CLICOLOR_FORCE), always or never.")
    ] = "auto",
    no_pager: Annotated[
        bool, typer.Option("--no-pager", help="Never page long output (on a terminal it "
                           "goes through $PAGER, default less -FRX).")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress, notes or warnings: the "
                           "results only.")
    ] = False,
) -> None:
    from memidex.cli.term import SETTINGS
    from memidex.errors import UsageError

    if color not in ("auto", "always", "never"):
        raise UsageError(f"unknown --color {color!r}: use auto, always or never")
    STATE.root = root
    SETTINGS.color, SETTINGS.pager, SETTINGS.quiet = color, not no_pager, quiet


def memidex(*, reading: bool = False, wait: float = 10.0,
            strict_config: bool = True) -> "Memidex":
    """The facade for this command (see :func:`memidex.cli.fast.open_memidex`)."""
    return open_memidex(STATE.root, reading=reading, wait=wait, strict_config=strict_config)
