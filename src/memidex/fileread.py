"""Reading a small file that must be a regular one, never a wait: the standard library only.

``open()`` of a FIFO waits for a writer, forever; a device can be read without end. So
the file is opened without blocking and read only when it is a regular file (a symlink to
one included). Used for ``memidex.toml`` before the configuration is imported
(:mod:`memidex.store.peek`) and for the secrets file (:mod:`memidex.masking`).
"""

from __future__ import annotations

import os
import stat

__all__ = ["NotRegularFile", "read_regular"]


class NotRegularFile(OSError):
    """The path is a FIFO, a socket or a device (:func:`read_regular`)."""


def read_regular(path: str, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (its first ``limit``; None: to its end), opened without
    blocking and read only when it is a regular file (a symlink to one included). Raises
    :class:`IsADirectoryError` for a folder, :class:`NotRegularFile` for a FIFO, a socket
    or a device, and the ``OSError`` of a missing or unreadable file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path)
        chunks: list[bytes] = []
        left = (1 << 62) if limit is None else limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
