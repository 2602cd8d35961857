"""The CLI's side of the warm path (protocol in :mod:`memidex.warm`): connect first, and
when a warm server answers, write what it printed and exit with its code.

Imported on every command, so it imports only the standard library's lightest modules.
:func:`run_warm` answers ``None`` — the caller then runs the command itself — when the
command is not one a warm server takes, when stdout is a terminal (a pager, the
terminal's width and colour belong to this process), with ``MEMIDEX_WARM=0``, when no
socket is there or nothing listens on it (a killed server: one failed ``connect``), or
when the server declines. :func:`serving` says which path a command took (``doctor``
reports it).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not `typing`'s: its import costs a warm command ~2 ms
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["ENV_NAMES", "ENV_PREFIXES", "command_of", "env_of", "find_root", "run_warm",
           "serving", "socket_address", "state_folder"]

ENV_NAMES = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "TERM", "COLUMNS", "LINES", "CI",
             "HOME", "TZ", "PAGER")
"""Environment variables a command's output or its configuration can depend on..."""
ENV_PREFIXES = ("MEMIDEX_", "GIT_", "XDG_")
"""... and every variable whose name starts with one of these."""
_NOT_COMPARED = ("MEMIDEX_WARM",)

READING = (("knowledge", "search"), ("knowledge", "show"), ("knowledge", "list"),
           ("brief",), ("doctor",))
WRITING = (("runs", "ingest"),)
_TOP_FLAGS = ("--no-pager", "--quiet", "-q")

_last: list[str] = ["not tried"]  # why the last command was not served warm
_current: list[dict[str, Any] | None] = [None]  # set by a warm server during a request

MAX_SUN_PATH = 100  # sockaddr_un holds 108 bytes; longer paths go through /proc/self/fd


def serving() -> dict[str, Any]:
    """Which path this command took: ``{"path": "warm", "pid"}`` inside a warm server,
    else ``{"path": "one-shot", "reason"}`` (why no warm server answered)."""
    current = _current[0]
    if current is not None:
        return dict(current)
    return {"path": "one-shot", "reason": _last[0]}


def command_of(argv: Sequence[str]) -> tuple[str | None, tuple[str, ...]] | None:
    """(the ``--root`` given or None, the command words) of a command line a warm server
    may take, or None. Only the plain spellings: top-level ``--root R``, ``--root=R``,
    ``--color C``, ``--no-pager``, ``--quiet`` before the command; no ``--help``."""
    root: str | None = None
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        if arg in ("--root", "--color") and i + 1 < len(argv) and \
                not argv[i + 1].startswith("-") and argv[i + 1]:
            if arg == "--root":
                root = argv[i + 1]
            i += 2
        elif arg.startswith("--root=") and len(arg) > 7 and arg[7] != "-":
            root, i = arg[7:], i + 1
        elif arg.startswith("--color=") or arg in _TOP_FLAGS:
            i += 1
        else:
            return None
    rest = argv[i:]
    for words in (*READING, *WRITING):
        if tuple(rest[: len(words)]) == words:
            if any(a in ("--help", "-h", "-") for a in rest):
                return None
            return root, words
    return None


def find_root(given: str | None) -> str | None:
    """The repository root as :func:`memidex.config.find_root` finds it (or ``--root``)."""
    if given is not None:
        path = os.path.realpath(given)
        return path if os.path.isdir(path) else None
    here = os.path.realpath(os.getcwd())
    git_top: str | None = None
    while True:
        if os.path.isfile(os.path.join(here, "memidex.toml")):
            return here
        if git_top is None and os.path.exists(os.path.join(here, ".git")):
            git_top = here
        parent = os.path.dirname(here)
        if parent == here:
            return git_top
        here = parent


def state_folder(root: str) -> str:
    """The state folder (``state_dir`` of memidex.toml, default ``.agent-qa``); TOML is
    parsed only when the file names ``state_dir``."""
    from memidex.store.peek import config_keys

    value = (config_keys(root, ("state_dir",)) or {}).get("state_dir")
    return os.path.join(root, value if isinstance(value, str) and value else ".agent-qa")


def socket_address(folder: str, name: str) -> tuple[str, int | None]:
    """The address to bind or connect ``folder/name`` by, and a descriptor to close after:
    a path too long for a Unix socket address goes through ``/proc/self/fd``."""
    path = os.path.join(folder, name)
    if len(os.fsencode(path)) <= MAX_SUN_PATH:
        return path, None
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}", fd


def env_of(environ: Any = None) -> dict[str, str | None]:
    """The environment variables a warm server compares with its own."""
    env = os.environ if environ is None else environ
    out: dict[str, str | None] = {name: env.get(name) for name in ENV_NAMES}
    for name, value in env.items():
        if name.startswith(ENV_PREFIXES) and not name.startswith(_NOT_COMPARED):
            out[name] = value
    return out


def run_warm(argv: Sequence[str]) -> int | None:
    """Run ``argv`` on a warm server: its exit code, or None (see the module doc). With
    ``MEMIDEX_WARM=require`` (for tests and benchmarks) a command a warm server takes but
    none answered exits 3 with one ``error:`` line instead."""
    mode = os.environ.get("MEMIDEX_WARM", "")
    if mode == "0":
        _last[0] = "MEMIDEX_WARM=0"
        return None
    code = _run_warm(argv)
    if code is None and mode == "require" and command_of(argv) is not None:
        sys.stderr.write(f"error: no warm server answered ({_last[0]})\n"
                         "hint: start `memidex daemon` in this repository, or unset "
                         "MEMIDEX_WARM\n")
        return 3
    return code


def _run_warm(argv: Sequence[str]) -> int | None:
    parsed = command_of(argv)
    if parsed is None:
        _last[0] = "not a command a warm server takes"
        return None
    if sys.stdout.isatty():
        _last[0] = "stdout is a terminal"
        return None
    root = find_root(parsed[0])
    if root is None:
        _last[0] = "no repository root"
        return None
    answer = _ask(root, {"argv": list(argv), "writing": parsed[1] in WRITING})
    if answer is None:
        return None
    sys.stdout.write(answer["stdout"])
    sys.stdout.flush()
    sys.stderr.write(answer["stderr"])
    sys.stderr.flush()
    return int(answer["exit"])


def _dumps(value: Any) -> str:
    """JSON for the request's values (str, bool, None, int, list, dict) — without the
    ``json`` module, whose import (with ``re``) costs a warm command ~4 ms."""
    if isinstance(value, str):
        return _quote(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    return "{" + ",".join(f"{_quote(k)}:{_dumps(v)}" for k, v in value.items()) + "}"


try:
    from _json import encode_basestring_ascii as _quote
except ImportError:  # pragma: no cover - every CPython has the accelerator
    from json import dumps as _quote


def _ask(root: str, what: dict[str, Any]) -> dict[str, Any] | None:
    try:
        import _socket as sockets  # the C module: `socket` imports enum (~3 ms)
    except ImportError:  # pragma: no cover
        import socket as sockets  # type: ignore[no-redef]

    from memidex._version import __version__
    from memidex.warm import ACCEPT_SECONDS, ACCEPTED, PROTOCOL, SOCKET_NAME

    try:
        address, fd = socket_address(state_folder(root), SOCKET_NAME)
    except OSError:
        _last[0] = "no state folder"
        return None
    request = {"memidex_warm": PROTOCOL, "version": __version__,
               "package": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
               "argv": what["argv"], "cwd": os.getcwd(), "root": root, "env": env_of(),
               "stdout_tty": False, "stderr_tty": sys.stderr.isatty(),
               "encoding": getattr(sys.stdout, "encoding", None) or "utf-8"}
    sock = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        try:
            sock.connect(address)
        except OSError as exc:  # no socket, or a stale one: nothing listens
            _last[0] = ("no warm server" if isinstance(exc, FileNotFoundError) else
                        f"no warm server answers ({exc.strerror or exc})")
            return None
        finally:
            if fd is not None:
                os.close(fd)
        sock.settimeout(ACCEPT_SECONDS)
        sock.sendall(_dumps(request).encode("ascii") + b"\n")
        sock.shutdown(sockets.SHUT_WR)
        head = b""
        try:
            while len(head) < len(ACCEPTED):
                chunk = sock.recv(len(ACCEPTED) - len(head))
                if not chunk:
                    break
                head += chunk
        except TimeoutError:  # `_socket.timeout` is TimeoutError
            _last[0] = (f"the warm server did not take the command within "
                        f"{ACCEPT_SECONDS:g} s (paused or busy)")
            return None
        if head != ACCEPTED:
            _last[0] = "the warm server gave no answer it understands"
            return None
        sock.settimeout(None if what["writing"] else 120.0)
        chunks = []
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        _last[0] = f"the warm server went away ({exc.strerror or exc})"
        return None
    finally:
        sock.close()
    return parse_answer(b"".join(chunks))


def parse_answer(data: bytes) -> dict[str, Any] | None:
    """The answer's header line and texts (see :mod:`memidex.warm`), or None (and why)."""
    from memidex.warm import PROTOCOL

    head, sep, body = data.partition(b"\n")
    words = head.decode("ascii", "replace").split(" ")
    if not sep or len(words) < 3 or words[0] != "memidex-warm" or words[1] != str(PROTOCOL):
        _last[0] = "the warm server gave no answer it understands"
        return None
    if words[2] == "declined":
        _last[0] = "the warm server declined: " + body.decode("utf-8", "replace")
        return None
    try:
        code, out_len, err_len = int(words[3]), int(words[4]), int(words[5])
        if words[2] != "served" or len(body) != out_len + err_len or out_len < 0:
            raise ValueError(head)
        out = body[:out_len].decode("utf-8", "surrogatepass")
        err = body[out_len:].decode("utf-8", "surrogatepass")
    except (ValueError, IndexError, UnicodeDecodeError):
        _last[0] = "the warm server gave a malformed answer"
        return None
    return {"exit": code, "stdout": out, "stderr": err}
