"""Human output (issue 10 item 3, issue 9 items 6 and 9) and the small surfaces of a first
session (issue 10 item 6): what a person reads is true, whole and safe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_record, run_cli, write_record
from memidex.cli.views import github_data, github_property

HOSTILE = "x\x1b[2J\x1b]0;pwned\x07\x9b31m tail\r\u2028"
CONTROL = {"\x1b", "\x07", "\x9b", "\r", "\u2028"}


def _long_repo(repo: Path) -> str:
    anchor = "el:button:" + "very-long-anchor-name-" * 4
    write_record(repo, make_record(anchor=anchor, title="A record with a long id"))
    return make_record(anchor=anchor).id


def test_show_says_never_confirmed_instead_of_none(repo: Path) -> None:
    rid = make_record().id
    write_record(repo, make_record())
    out = run_cli(repo, "knowledge", "show", rid, check=True).stdout
    assert "None" not in out
    assert "never confirmed by a run" in out


def test_ids_and_paths_are_never_wrapped_when_piped(repo: Path) -> None:
    rid = _long_repo(repo)
    path = f"agent-qa-knowledge/memory/records/fact/{rid}.md"
    show = run_cli(repo, "knowledge", "show", rid, check=True).stdout
    assert any(rid in line and path in line for line in show.splitlines()), show
    listing = run_cli(repo, "knowledge", "list", check=True).stdout
    assert any(rid in line for line in listing.splitlines()), listing
    doctor = run_cli(repo, "doctor").stdout
    assert str(repo.resolve() / "memidex.toml") in doctor


def test_search_output_states_its_order_rule(repo: Path) -> None:
    write_record(repo, make_record(title="Place order disabled", anchor="el:a:one"))
    write_record(repo, make_record(title="Order history", anchor="el:a:two",
                                   body="Order order order order."))
    out = run_cli(repo, "knowledge", "search", "place order disabled", check=True).stdout
    assert "most query words matched first, then score" in out
    lines = [line for line in out.splitlines() if "/3 words" in line]
    assert "3/3 words" in lines[0] and "1/3 words" in lines[-1], out


def test_help_texts_of_list(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "list", "--help", check=True).stdout
    assert "Search every product" not in out
    limit = out[out.index("--limit"):]
    assert "at most" in limit.split("--", 2)[1], out


def test_supersede_without_a_flag_says_what_to_give(repo: Path) -> None:
    write_record(repo, make_record())
    out = run_cli(repo, "knowledge", "supersede", make_record().id)
    assert out.returncode == 2
    assert "not both" not in out.stderr
    assert "needs --title" in out.stderr and "--by" in out.stderr


def test_a_scope_key_given_twice_is_refused(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:a:b",
                  "--title", "t", "--scope", "a=1", "--scope", "a=2")
    assert out.returncode == 2 and "--scope a is given twice" in out.stderr
    assert not list((repo / "agent-qa-knowledge/memory/records/fact").glob("*.md"))


def test_no_terminal_escape_reaches_human_output(repo: Path) -> None:
    """Issue 9 item 9: an escape sequence in a title (or a file name) is shown as text."""
    rid = run_cli(repo, "knowledge", "add", "--kind", "fact", "--anchor", "el:a:b",
                  "--title", HOSTILE, "--body", f"body {HOSTILE}\nsecond line",
                  "--json", check=True)
    assert rid.returncode == 0
    facts = repo / "agent-qa-knowledge/memory/records/fact"
    (facts / "bad\x1b]0;t\x07.md").write_text("---\nid: nope\n---\n", encoding="utf-8")
    outputs = [
        run_cli(repo, "knowledge", "list").stdout,
        run_cli(repo, "knowledge", "show", "fact-el-a-b").stdout,
        run_cli(repo, "knowledge", "search", "tail").stdout,
        run_cli(repo, "knowledge", "check").stdout,
        run_cli(repo, "doctor").stdout,
        run_cli(repo, "knowledge", "rebuild-index").stdout,
        run_cli(repo, "knowledge", "confirm", "fact-el-a-b").stdout,
    ]
    for out in outputs:
        assert out and not CONTROL & set(out), repr(out)
    assert "second line" in outputs[1]  # a body keeps its line breaks


def test_github_annotations_escape_data_and_properties() -> None:
    assert github_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert github_property("a,b:c\n::warning x") == "a%2Cb%3Ac%0A%3A%3Awarning x"


def test_a_file_name_cannot_forge_an_annotation(repo: Path) -> None:
    """Issue 9 item 6: a newline and `::warning` in a file name, a comma in another."""
    facts = repo / "agent-qa-knowledge/memory/records/fact"
    (facts / "x\n::warning file=README.md,line=1::INJECTED.md").write_text(
        "---\nid: x\n---\n", encoding="utf-8")
    (facts / "a,line=99.md").write_text("---\nid: y\n---\n", encoding="utf-8")
    out = run_cli(repo, "knowledge", "check", "--format", "github")
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines and all(line.startswith("::error file=") for line in lines), lines
    assert not any("::warning" in line for line in lines)
    for line in lines:
        props = line.split("::")[1].removeprefix("error ")
        assert [p.split("=")[0] for p in props.split(",")] == ["file", "line", "title"], line


def test_version_and_shell_completion(repo: Path) -> None:
    from memidex._version import __version__

    out = run_cli(repo, "--version", check=True)
    import memidex

    first, where, python = out.stdout.splitlines()
    assert first == f"memidex {__version__}"  # and where it runs from
    assert where == f"  from {Path(memidex.__file__).resolve().parent}"
    assert python.startswith("  python 3.") and python.endswith(f" at {sys.executable}")
    # the shell named, not detected from the process tree (under `make` it is sh, which
    # typer does not complete; shellingham, when installed, would be asked)
    shown = subprocess.run([sys.executable, "-m", "memidex", "--show-completion", "bash"],
                           cwd=repo, capture_output=True, text=True, check=False,
                           env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert shown.returncode == 0, shown.stderr
    assert "_MEMIDEX_COMPLETE=complete_bash" in shown.stdout
    env = {**os.environ, "_MEMIDEX_COMPLETE": "complete_bash",
           "COMP_WORDS": "memidex knowledge se", "COMP_CWORD": "2"}
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'memidex'; "
                           "from memidex.cli.main import run; run()"], cwd=repo, env=env,
                          capture_output=True, text=True, check=False)
    assert done.stdout.split() == ["search"], done


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_init_keeps_the_line_endings_of_a_gitignore(tmp_path: Path, newline: str) -> None:
    root = tmp_path / "app"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_bytes(f"node_modules/{newline}*.log".encode())
    run_cli(root, "init", check=True)
    data = (root / ".gitignore").read_bytes()
    assert data.startswith(f"node_modules/{newline}*.log{newline}".encode())
    lines = data.split(b"\n")
    assert len(lines) > 5
    if newline == "\r\n":
        assert all(line.endswith(b"\r") for line in lines[:-1]), data
    else:
        assert b"\r" not in data


def test_init_warns_outside_a_git_repository(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    out = run_cli(root, "init", check=True)
    assert "warning: not inside a git repository" in out.stderr
    assert 'product = "plain"' in (root / "memidex.toml").read_text(encoding="utf-8")
    inside = tmp_path / "repo2"
    inside.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=inside, check=True)
    assert "warning" not in run_cli(inside, "init", check=True).stderr


def test_init_names_the_product_from_flag_remote_or_folder(tmp_path: Path) -> None:
    root = tmp_path / "folder-name"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "remote", "add", "origin", "git@github.com:acme/shop-web.git"],
                   cwd=root, check=True)
    run_cli(root, "init", check=True)
    assert 'product = "shop-web"' in (root / "memidex.toml").read_text(encoding="utf-8")
    other = tmp_path / "other"
    other.mkdir()
    run_cli(other, "init", "--product", "given.app", check=True)
    assert 'product = "given.app"' in (other / "memidex.toml").read_text(encoding="utf-8")
    # an existing config without a product gets the one given, before its first table
    third = tmp_path / "third"
    third.mkdir()
    (third / "memidex.toml").write_text("# mine\n[promotion]\nmin_confirmations = 2\n",
                                        encoding="utf-8")
    run_cli(third, "init", "--product", "p3", check=True)
    text = (third / "memidex.toml").read_text(encoding="utf-8")
    assert text == '# mine\nproduct = "p3"\n[promotion]\nmin_confirmations = 2\n'


def test_doctor_is_healthy_right_after_init_and_add(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    run_cli(root, "init", check=True)
    run_cli(root, "knowledge", "add", "--kind", "fact", "--anchor", "el:a:b", "--title",
            "Pay is disabled", check=True)
    assert run_cli(root, "doctor").returncode == 0
    out = run_cli(root, "knowledge", "search", "pay", check=True).stdout
    assert "note:" not in out and "Pay is disabled" in out


def test_error_lines_do_not_carry_terminal_escapes(repo: Path) -> None:
    out = run_cli(repo, "knowledge", "show", "x\x1b]0;pwned\x07")
    assert out.returncode == 2 and out.stderr.startswith("error: ")
    assert not CONTROL & set(out.stderr), repr(out.stderr)
