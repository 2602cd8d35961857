"""The fast path (search, rebuild-index, brief, doctor, runs ingest) parses exactly what
typer parses, or leaves the command line to typer."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_record, run_cli, write_record
from memidex.cli import commands, runs, serve
from memidex.cli.fast import (
    BriefArgs,
    DoctorArgs,
    IngestArgs,
    RebuildArgs,
    SearchArgs,
    parse_fast,
)
from memidex.cli.main import _typer


def typer_parse(argv: list[str], monkeypatch: pytest.MonkeyPatch
                ) -> SearchArgs | RebuildArgs | BriefArgs | DoctorArgs | IngestArgs | None:
    """What the typer application hands the command body for ``argv`` (None: it refused,
    printed help, or ran another command)."""
    seen: list[SearchArgs | RebuildArgs | BriefArgs | DoctorArgs | IngestArgs] = []
    monkeypatch.setattr(commands, "run_search", seen.append)
    monkeypatch.setattr(commands, "run_doctor", seen.append)
    monkeypatch.setattr(runs, "run_ingest", seen.append)
    monkeypatch.setattr(commands, "run_rebuild", seen.append)
    monkeypatch.setattr(serve, "run_brief", seen.append)
    try:
        _typer(argv)
    except SystemExit:
        pass
    return seen[0] if seen else None


_PLAIN_VALUES = st.sampled_from(["shop-web", "fact", "any", "el:button:*", "3", "007", "a b",
                                 "é", "", "2.5", "0.0", "auto", "junit"])
_ODD_VALUES = st.sampled_from(["0", "-3", "=", "-", "--", "-x", "--json", "٣", "1e3", "+2",
                               "inf", "nan", ".5", "5.", "1_0", "0x10"])
_OPTIONS = st.sampled_from(["--product", "-p", "--kind", "-k", "--status", "-s", "--anchor",
                            "-a", "--limit", "-n", "--jobs", "-j", "--at", "--budget",
                            "--format", "-f", "--build-tag", "--run-id", "--wait"])


@st.composite
def _option(draw: st.DrawFn) -> list[str]:
    name = draw(_OPTIONS)
    value = draw(st.one_of(*[_PLAIN_VALUES] * 4, _ODD_VALUES))
    spelling = draw(st.sampled_from(["apart", "apart", "equals", "glued"]))
    if spelling == "apart":
        return [name, value]
    return [f"{name}={value}"] if spelling == "equals" else [name + value]


_ODD_TOKENS = st.sampled_from([["--json=1"], ["--help"], ["-h"], ["--"], ["-"], ["--limit"],
                               ["--nope"], ["-jk"], ["second query"], ["--root", "/r"]])
_PREFIX = st.sampled_from([[], [], ["--root", "/r"], ["--root=/r"], ["--root", "-x"],
                           ["--root=/a", "--root", "/b"], ["--version"], ["--json"]])
_COMMAND = st.sampled_from([["knowledge", "search"]] * 5 + [["knowledge", "rebuild-index"]] * 3
                           + [["brief"]] * 4 + [["doctor"]] * 3 + [["runs", "ingest"]] * 4
                           + [["runs", "list"]]
                           + [["knowledge", "list"], ["search"], ["knowledge"]])


@st.composite
def _argv(draw: st.DrawFn) -> list[str]:
    tokens = draw(st.lists(st.one_of(*[_option()] * 6,
                                     st.sampled_from([["--json"], ["--all-products"],
                                                      ["--explain"], ["--no-record"],
                                                      ["--deep"], ["--ci"], ["--no-wait"],
                                                      ["--dry-run"]]),
                                     _ODD_TOKENS), max_size=4))
    command = draw(_COMMAND)
    if command[-1] not in ("rebuild-index", "doctor") or draw(st.integers(0, 9)) == 0:
        tokens.insert(draw(st.integers(0, len(tokens))), [draw(st.sampled_from(
            ["place order", "disabled", "x", "run.json", "a/b.xml", ""]))])
    return [*draw(_PREFIX), *command, *sum(tokens, [])]


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=_argv())
def test_fast_path_parses_as_typer_does_or_declines(
        argv: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    fast = parse_fast(argv)
    if fast is None:
        return
    expected = typer_parse(argv, monkeypatch)
    capsys.readouterr()
    assert expected == fast, argv


@pytest.mark.parametrize("argv", [
    ["knowledge", "search", "place order"],
    ["--root", "/r", "knowledge", "search", "x", "--json", "-n", "3"],
    ["--root=/r", "knowledge", "search", "--product", "p", "x", "-k", "fact", "-k", "caution"],
    ["knowledge", "search", "x", "--status=any", "--anchor", "el:*", "--all-products"],
    ["knowledge", "rebuild-index"],
    ["--root", "/r", "knowledge", "rebuild-index", "--jobs", "2", "--json"],
    ["brief", "checkout-happy-path"],
    ["--root", "/r", "brief", "t1", "-a", "page:/checkout", "--anchor=el:x:y", "--at", "7",
     "--budget", "400", "--format", "json", "--explain", "--no-record"],
    ["doctor"],
    ["--root", "/r", "doctor", "--deep", "--json"],
    ["runs", "ingest", "run.json"],
    ["--root", "/r", "runs", "ingest", "r.xml", "--ci", "--build-tag", "b7", "--format",
     "junit", "-p", "shop", "--run-id", "r-1", "--wait", "2.5", "--no-wait", "--json"],
])
def test_ordinary_searches_take_the_fast_path(argv: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fast = parse_fast(argv)
    assert fast is not None
    assert fast == typer_parse(argv, monkeypatch)


def test_help_and_mistakes_are_typers(repo: Path) -> None:
    assert parse_fast(["knowledge", "search", "--help"]) is None
    assert parse_fast(["knowledge", "rebuild-index", "extra"]) is None
    assert parse_fast(["doctor", "--help"]) is None
    assert parse_fast(["doctor", "extra"]) is None
    assert parse_fast(["runs", "ingest"]) is None  # no file: typer's usage error
    assert parse_fast(["runs", "ingest", "a.json", "--wait", "1e3"]) is None
    out = run_cli(repo, "knowledge", "search", "x", "--limit", "0")
    assert out.returncode == 2 and "--limit" in out.stderr  # click's usage error
    out = run_cli(repo, "knowledge", "search", "--help")
    assert out.returncode == 0 and "--strategy" in out.stdout


def test_fast_path_output_and_errors(repo: Path) -> None:
    write_record(repo, make_record(title="Place order is disabled"))
    text = run_cli(repo, "knowledge", "search", "place order", check=True).stdout
    assert "Place order is disabled" in text and "\x1b[" not in text  # no colour in a pipe
    out = run_cli(repo, "knowledge", "search", "x", "--kind", "nope")
    assert out.returncode == 2 and out.stderr.startswith("error: unknown kind 'nope'")


def test_escaping_for_rich_loads_rich_only_when_it_changes_the_text() -> None:
    import subprocess
    import sys

    from memidex.cli.render import escape

    assert escape("plain text") == "plain text"  # no "[": rich is not needed to escape it
    assert escape("[bold]x") == "\\[bold]x"
    code = ("import sys; from memidex.cli.render import escape; escape('a b'); "
            "print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
