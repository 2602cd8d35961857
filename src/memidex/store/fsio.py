"""The one implementation of crash-safe file writes (RELIABILITY.md, "Atomic replace").

Every file memidex writes — a record, the journal, the lease's copies, the index swapped
into place — is written to a uniquely named temp file (``O_EXCL``) in the same folder,
fsynced, ``os.replace``-d over the target, and the folder fsynced, so a reader sees the
old bytes or the new, never a mix. ``os.replace`` appears nowhere else in the package (an
AST test keeps it so).

The module reaches the operating system through its module-level name ``os`` only, so
that fault-injection tests (:mod:`memidex._testing`) can swap that one name.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from memidex.errors import UnsafePathError

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

StrPath = str | os.PathLike[str]
"""A path as ``os`` takes it: the writer's hot path passes plain strings (no pathlib)."""

_REAL_OS = os  # fault injection (memidex._testing) replaces the module's `os`

__all__ = ["append", "append_durable", "atomic_write", "dump_json", "fsync_dir", "fsync_dirs",
           "fsync_file", "load_json", "read_int", "read_json", "refuse_symlink", "swap_into_place",
           "sync_files", "temp_name", "write_new"]


def dump_json(data: Any, *, indent: int | None = None) -> bytes:
    """The one JSON form of memidex's state files: sorted keys, UTF-8, newline-terminated."""
    return (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=indent)
            + "\n").encode("utf-8")


def fsync_dir(folder: StrPath) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: StrPath) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_into_place(src: StrPath, dst: StrPath, *, sync_folder: bool = True) -> None:
    """Atomically rename ``src`` over ``dst`` (same file system) and fsync ``dst``'s folder
    (``sync_folder=False``: the caller fsyncs the folders of a batch once, :func:`fsync_dirs`)."""
    os.replace(src, dst)
    if sync_folder:
        fsync_dir(os.path.dirname(os.fspath(dst)) or ".")


def fsync_dirs(folders: Iterable[StrPath]) -> None:
    """fsync each distinct folder once (after a batch of renames into them)."""
    for folder in sorted({os.fspath(f) for f in folders}):
        fsync_dir(folder)


_SYNCFS: Any = None


def _syncfs() -> Any:
    """libc's syncfs(2) (Linux), or False where there is none."""
    global _SYNCFS
    if _SYNCFS is None:
        _SYNCFS = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                _SYNCFS = libc.syncfs
            except (OSError, AttributeError):
                _SYNCFS = False
    return _SYNCFS


def sync_files(paths: Sequence[StrPath], folders: Iterable[StrPath] = ()) -> None:
    """Make a batch of files written with ``durable=False`` (and renames into
    ``folders``) durable: on Linux one syncfs(2) of the file system they are on, instead
    of one fsync per file and folder; elsewhere (or when fault injection replaced ``os``)
    an fsync of each file, then of each folder."""
    folders = list(folders)
    if not paths and not folders:
        return
    if not paths:
        fsync_dirs(folders)
        return
    syncfs = _syncfs()
    if syncfs and os is _REAL_OS:
        folder = os.path.dirname(os.fspath(paths[0])) or "."
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if syncfs(fd) != 0:
                import ctypes

                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code), folder)
        finally:
            os.close(fd)
        return
    for path in paths:
        fsync_file(path)
    fsync_dirs(folders)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_new(path: StrPath, data: bytes, *, durable: bool = True) -> None:
    """Create ``path`` (it must not exist: ``O_EXCL``) holding ``data``; fsync it if durable.

    A failure removes the partial file and re-raises.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise
    os.close(fd)


def refuse_symlink(path: Path) -> None:
    """Raise :class:`UnsafePathError` when ``path`` is a symlink: memidex's own state
    files are never followed out of the folder they belong to."""
    if os.path.islink(path):
        raise UnsafePathError(f"{path} is a symlink where memidex keeps a file of its own",
                              hint="remove the link; memidex recreates the file")


def _open_append(path: Path) -> int:
    """``O_APPEND | O_CREAT`` that never follows a symlink (a planted link would lead the
    append outside the repository)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_symlink(path)
        raise


def append(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created when missing) with one ``O_APPEND`` write loop.

    Not fsynced: callers use it for marks whose loss only costs a replay.
    """
    fd = _open_append(path)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def append_durable(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created when missing) and fsync it (and, when it was
    created, its folder): a line that must survive the process, like a ledger entry."""
    created = not os.path.exists(path)
    fd = _open_append(path)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)


def temp_name(path: Path, suffix: str = ".tmp") -> Path:
    """A unique name beside ``path`` for a file that will replace it."""
    # os.urandom is what secrets.token_hex draws from (secrets imports random, base64...)
    return path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}{suffix}")


def atomic_write(path: Path, data: bytes, *, durable: bool = True,
                 temp_dir: Path | None = None) -> None:
    """Write ``data`` to a unique temp file beside ``path`` (or in ``temp_dir``, on the
    same file system) and swap it into place.

    ``durable`` (the default) fsyncs the file before the swap; informational copies
    (``.lease``, ``daemon.json``) skip that and are still never seen half-written.
    """
    tmp = temp_name(path if temp_dir is None else temp_dir / path.name)
    write_new(tmp, data, durable=durable)
    try:
        swap_into_place(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # inf (1e400) or nan
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"not a JSON number: {text}")


_STATE_JSON = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)


def load_json(text: str | bytes) -> Any:
    """``json.loads`` for memidex's own files, whose numbers must be finite: ``1e400``
    (read as infinity) or ``NaN`` is a ``ValueError`` like any other damage, never an
    ``OverflowError`` from a later ``int()``."""
    if isinstance(text, bytes):  # (as json.loads reads bytes)
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    return _STATE_JSON.decode(text)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a small state file, or None if it is missing or not one."""
    try:
        data = load_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def read_int(path: Path) -> int:
    """A non-negative integer from a small state file; 0 when missing or unreadable."""
    try:
        return max(0, int(path.read_text(encoding="utf-8").strip()))
    except (OSError, ValueError, UnicodeDecodeError):
        return 0
