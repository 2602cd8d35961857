"""Serving the CLI's commands warm (``docs/warm.md``): the handler a warm server
(:mod:`memidex.warm.server`) answers each request with.

A request is run by :func:`memidex.cli.main.main` itself — the same command functions,
the same error mapping — with ``sys.stdout`` and ``sys.stderr`` captured for this thread,
and with one facade kept open across requests (:func:`memidex.cli.fast.warm_facade`):
its index stays open, and the watcher (:mod:`memidex.warm.watch`) names what changed
since the last request, so each command still brings the index up to date first. So
the answer is, by construction, what a one-shot run would print.

The server declines (the client then runs the command itself) a client of another
memidex, another repository or another environment (:data:`memidex.warm.client.ENV_NAMES`),
a configuration with problems (a one-shot run reports them its own way), a folder that
is gone, and a write whose progress would show on a terminal. ``memidex.toml`` is
looked at on every request: when it changed, the facade is built again.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memidex.app import Memidex
    from memidex.warm.server import WarmServer
    from memidex.warm.watch import Watcher

__all__ = ["RUN_COMMAND", "WarmCommands", "serving"]

READY_SECONDS = 120.0
RUN_COMMAND: list[Callable[[list[str]], int] | None] = [None]
"""The CLI's entry (:func:`memidex.cli.main.main`), registered by it before it runs a
typer command (the ``daemon`` among them): a request is run through it."""


def _config_stamp(root: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(root / "memidex.toml")
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class WarmCommands:
    """The commands of one repository, served warm (see the module doc)."""

    def __init__(self, root: Path, *, log: Callable[[str], None] | None = None) -> None:
        from memidex.warm.client import env_of
        from memidex.warm.server import Capture

        self.root = root.resolve()
        self.log = log or (lambda _line: None)
        self.env = env_of()
        self.capture = Capture()
        self.home = os.getcwd()
        self.m: Memidex | None = None
        self.stamp: tuple[int, int, int] | None = None
        self.watcher: Watcher | None = None
        self.watch_note = ""

    # --- the facade ----------------------------------------------------------------

    def warm_up(self) -> None:
        """In the server's thread: open the index, start watching, and run ``--help``
        once (typer and every command imported)."""
        self._load()
        assert self.m is not None
        self.m.reading.open()
        run = RUN_COMMAND[0]
        if run is not None:
            with self.capture.capturing(stdout_tty=False, stderr_tty=False,
                                        encoding="utf-8"):
                run(["--help"])

    def _load(self) -> None:
        from memidex.app import Memidex

        if self.m is not None:
            self.m.close()
        self.stamp = _config_stamp(self.root)
        m = Memidex(self.root, strict_config=False)
        m.reading.recheck_seconds = 0.0  # every command looks (the watcher makes it cheap)
        tops = m.reading.watched_folders()
        root = str(m.store.root)
        m.reading.watch(None)
        self._close_watcher()
        from memidex.warm.watch import Watcher, available

        why = available()
        if why is None:
            try:
                self.watcher = Watcher(root, tops)
            except OSError as exc:  # e.g. the inotify limits of this user reached
                why = f"cannot watch the folders ({exc.strerror or exc})"
        if self.watcher is not None:
            m.reading.watch(self.watcher)
            self.watch_note = "watching the record and policy folders (inotify)"
        else:
            self.watch_note = f"no file watcher ({why}): each command asks git"
        self.m = m

    def _close_watcher(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def close(self) -> None:
        if self.m is not None:
            self.m.reading.watch(None)
            self.m.close()
            self.m = None
        self._close_watcher()

    # --- a request -----------------------------------------------------------------

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """The answer to one request (protocol in :mod:`memidex.warm`)."""
        from memidex._version import __version__
        from memidex.warm import client

        package = os.path.dirname(os.path.dirname(os.path.abspath(client.__file__)))
        if request.get("version") != __version__ or request.get("package") != package:
            return _declined("the client runs another memidex")
        if request.get("root") != str(self.root):
            return _declined("another repository")
        env = request.get("env")
        if env != self.env:
            names = sorted(set(env or {}) ^ set(self.env) | {
                k for k in self.env if isinstance(env, dict) and env.get(k) != self.env[k]})
            return _declined("another environment (" + ", ".join(names[:5]) + ")")
        argv = request.get("argv")
        cwd = request.get("cwd")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or \
                not isinstance(cwd, str):
            return _declined("malformed request")
        parsed = client.command_of(argv)
        if parsed is None:
            return _declined("not a command a warm server takes")
        writing = parsed[1] in client.WRITING
        if writing and request.get("stderr_tty"):
            return _declined("a write shows its progress on the terminal")
        if writing and not self._daemon_here():
            return _declined("writes go warm only into a daemon holding the lease")
        if not os.path.isdir(cwd):
            return _declined("the client's folder is gone")
        if self.m is None or _config_stamp(self.root) != self.stamp:
            self._load()
        assert self.m is not None
        if self.m.config.problems:
            return _declined(f"{self.m.config.config_file} has problems")
        if RUN_COMMAND[0] is None:
            return _declined("no command runner registered")
        code, out, err = self._run(argv, cwd, bool(request.get("stderr_tty")),
                                   str(request.get("encoding") or "utf-8"), writing)
        return {"served": True, "exit": code, "stdout": out, "stderr": err,
                "pid": os.getpid()}

    def _daemon_here(self) -> bool:
        """Whether the live daemon holding the lease is this process."""
        from memidex.write.inbox import live_daemon

        assert self.m is not None
        daemon = live_daemon(self.m.store)
        return daemon is not None and daemon.pid == os.getpid()

    def _run(self, argv: list[str], cwd: str, stderr_tty: bool, encoding: str,
             writing: bool) -> tuple[int, str, str]:
        from memidex.cli import fast
        from memidex.cli.term import SETTINGS
        from memidex.warm import client
        from memidex.write import daemon

        assert self.m is not None
        SETTINGS.color, SETTINGS.pager, SETTINGS.quiet, SETTINGS.paging = \
            "auto", True, False, False
        client._current[0] = {"path": "warm", "pid": os.getpid(), "watch": self.watch_note}
        fast.warm_facade(self.m)
        if writing:
            daemon.HURRY.set()  # a daemon in this process looks at its inbox at once
        os.chdir(cwd)
        try:
            with self.capture.capturing(stdout_tty=False, stderr_tty=stderr_tty,
                                        encoding=encoding) as (out, err):
                run = RUN_COMMAND[0]
                assert run is not None
                code = run(list(argv))
            return code, out.getvalue(), err.getvalue()
        finally:
            os.chdir(self.home)
            daemon.HURRY.clear()
            fast.warm_facade(None)
            client._current[0] = None


@contextlib.contextmanager
def serving(root: Path, *, log: Callable[[str], None] | None = None,
            enabled: bool = True, ready: bool = True) -> Iterator[WarmServer | None]:
    """Serve ``root``'s commands warm while the block runs (``None`` when not
    ``enabled``, when another process already serves them, or when the socket cannot be
    made: the block runs all the same). ``ready``: wait until the index is open and
    current before the block runs (the daemon); else the block starts at once and a
    command sent meanwhile waits for the warm-up (an MCP server, the dashboard)."""
    from memidex.config import load_config
    from memidex.warm.server import WarmServer

    if not enabled:
        yield None
        return
    from memidex.errors import MemidexError
    from memidex.store.files import Store

    say = log or (lambda _line: None)
    config = load_config(root, strict=False)
    try:
        Store(config).check_state_folder()  # its socket and lock go there
    except MemidexError as exc:
        say(f"memidex warm server: not serving ({exc.message})")
        yield None
        return
    commands = WarmCommands(config.root, log=say)
    server = WarmServer(config.state_path, commands.handle, warm_up=commands.warm_up,
                        log=say)
    commands.capture.install()  # before the server's thread prints anything
    if not server.start():
        commands.capture.uninstall()
        say(f"memidex warm server: not serving ({server.failure})")
        yield None
        return
    if ready:
        server.wait_ready(READY_SECONDS)  # the index open and current before the block
    say(f"memidex warm server: serving reads on {server.path}")
    try:
        yield server
    finally:
        server.stop()
        commands.capture.uninstall()
        commands.close()
        sys.stderr.flush()


def _declined(reason: str) -> dict[str, Any]:
    return {"served": False, "reason": reason}
