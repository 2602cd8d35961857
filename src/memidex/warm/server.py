"""The warm server's socket (protocol in :mod:`memidex.warm`): one listening Unix socket
in the state folder, one thread that accepts a connection, reads its request, has the
handler answer it and writes the answer — one request at a time, in order.

Only one server serves a state folder: it holds ``warm.lock`` (``flock``) for its life;
a second one finds it held and does not serve. A socket left by a killed server is
removed by the next one (holding the lock). The socket is created with mode 0600, and a
peer of another user id is refused (``SO_PEERCRED``). :class:`Capture` routes
``sys.stdout`` and ``sys.stderr`` per thread, so a command run for a client prints into
its answer while the rest of the process (a daemon's log lines) prints as before.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from memidex.warm import ACCEPTED, LOCK_NAME, PROTOCOL, SOCKET_NAME
from memidex.warm.client import socket_address

__all__ = ["MAX_REQUEST", "Capture", "Handler", "WarmServer", "encode_answer"]

MAX_REQUEST = 1 << 20
READ_TIMEOUT = 5.0
Handler = Callable[[dict[str, Any]], dict[str, Any]]


class _Buffer(io.StringIO):
    """What one command prints on one stream, with the client's view of that stream."""

    def __init__(self, tty: bool, encoding: str) -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    def isatty(self) -> bool:
        return self._tty

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


class _Routed(io.TextIOBase):
    """A stand-in for ``sys.stdout`` or ``sys.stderr``: a thread capturing writes to its
    buffer, every other thread to the original stream."""

    def __init__(self, original: TextIO, local: threading.local, which: str) -> None:
        self._original = original
        self._local = local
        self._which = which

    def _target(self) -> TextIO:
        buffers = getattr(self._local, "buffers", None)
        return buffers[self._which] if buffers is not None else self._original

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def fileno(self) -> int:
        if getattr(self._local, "buffers", None) is not None:
            raise io.UnsupportedOperation("a captured stream has no file descriptor")
        return self._original.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._target().encoding

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


class Capture:
    """Routes ``sys.stdout``/``sys.stderr`` per thread while installed."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._saved: tuple[TextIO, TextIO] | None = None

    def install(self) -> None:
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = _Routed(sys.stdout, self._local, "stdout")
        sys.stderr = _Routed(sys.stderr, self._local, "stderr")

    def uninstall(self) -> None:
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved
            self._saved = None

    @contextlib.contextmanager
    def capturing(self, *, stdout_tty: bool, stderr_tty: bool, encoding: str
                  ) -> Iterator[tuple[_Buffer, _Buffer]]:
        """In this thread, what is printed goes to two buffers (yielded)."""
        out, err = _Buffer(stdout_tty, encoding), _Buffer(stderr_tty, encoding)
        self._local.buffers = {"stdout": out, "stderr": err}
        try:
            yield out, err
        finally:
            self._local.buffers = None


class WarmServer:
    """The socket of ``state_dir``, served by one thread with ``handler``."""

    def __init__(self, state_dir: Path, handler: Handler, *,
                 warm_up: Callable[[], None] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.state_dir = state_dir
        self.handler = handler
        self.warm_up = warm_up
        self.log = log or (lambda _line: None)
        self.path = state_dir / SOCKET_NAME
        self.served = 0
        self._lock_fd: int | None = None
        self._sock: socket.socket | None = None
        self._ino: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.failure: str | None = None

    # --- life --------------------------------------------------------------------

    def start(self) -> bool:
        """Take the lock and listen; False (and :attr:`failure`) when another server
        serves this state folder or the socket cannot be made. The handler's thread
        runs ``warm_up`` first, then serves."""
        import fcntl

        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                         0o600)
        except OSError as exc:
            self.failure = f"cannot use {self.state_dir}: {exc.strerror or exc}"
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self.failure = "another warm server serves this repository"
            return False
        self._lock_fd = fd
        try:
            self._sock = self._listen()
        except OSError as exc:
            self._release()
            self.failure = f"cannot listen on {self.path}: {exc.strerror or exc}"
            return False
        self._thread = threading.Thread(target=self._serve, name="memidex-warm",
                                        daemon=True)
        self._thread.start()
        return True

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the warm-up is done and requests are answered."""
        return self._ready.wait(timeout)

    def _listen(self) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a killed server's (we hold the lock: no live one has it)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address, fd = socket_address(str(self.state_dir), SOCKET_NAME)
        try:
            sock.bind(address)
            os.chmod(address, 0o600)
            self._ino = os.stat(address).st_ino
        except OSError:
            sock.close()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        sock.listen(64)
        sock.settimeout(0.2)  # to see stop(); a connection is accepted at once
        return sock

    def stop(self) -> None:
        """Stop serving (after the request being answered), remove the socket, release
        the lock."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self._ino:
                    self.path.unlink()
        self._release()

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- serving -------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            if self.warm_up is not None:
                self.warm_up()
        except Exception as exc:  # serve anyway: each request is answered or declined
            self.log(f"memidex warm server: warm-up failed: {exc}")
        self._ready.set()
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(READ_TIMEOUT)
            if not _same_user(conn):
                return
            request = _read_request(conn)
            conn.sendall(ACCEPTED)  # before anything runs: a client waits for this only
            if request is None:
                answer: dict[str, Any] = {"served": False, "reason": "malformed request"}
            elif request.get("memidex_warm") != PROTOCOL:
                answer = {"served": False, "reason": "another protocol version"}
            else:
                try:
                    answer = self.handler(request)
                except Exception as exc:  # the client runs the command itself
                    answer = {"served": False, "reason": f"the warm server failed: {exc!r}"}
            conn.settimeout(None)
            conn.sendall(encode_answer(answer))
            if answer.get("served"):
                self.served += 1
        except OSError:
            return  # the client went away


def encode_answer(answer: dict[str, Any]) -> bytes:
    """The answer on the wire, after :data:`~memidex.warm.ACCEPTED`: ``memidex-warm 2
    served EXIT OUT_BYTES ERR_BYTES PID``, a line break, then stdout's and stderr's text
    (UTF-8); or ``memidex-warm 2 declined``, a line break and the reason."""
    if not answer.get("served"):
        reason = str(answer.get("reason") or "")
        return f"memidex-warm {PROTOCOL} declined\n".encode("ascii") + reason.encode("utf-8")
    out = str(answer["stdout"]).encode("utf-8", "surrogatepass")
    err = str(answer["stderr"]).encode("utf-8", "surrogatepass")
    head = (f"memidex-warm {PROTOCOL} served {int(answer['exit'])} {len(out)} {len(err)} "
            f"{int(answer.get('pid') or os.getpid())}\n")
    return head.encode("ascii") + out + err


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this process's user (Linux ``SO_PEERCRED``)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return True  # elsewhere: the socket's mode 0600 is the guard
    creds = conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_REQUEST:
            return None
        if chunk.endswith(b"\n"):
            break
    try:
        request = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return request if isinstance(request, dict) else None
