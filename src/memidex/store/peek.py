"""A first look at a small file before anything else is imported: its bytes when it is a
regular file, never a wait.

The CLI reads ``memidex.toml`` before it imports the configuration (the warm client for
``state_dir``, the early git call for the folders). ``open()`` of a FIFO waits for a
writer, forever; a device can be read without end. So the file is opened without
blocking and read only when it is a regular file (a symlink to one included) — what
:func:`memidex.config.load_config` takes for a configuration file too (``is_file``).
"""

from __future__ import annotations

import os

from memidex.fileread import read_regular

__all__ = ["config_keys", "regular_bytes"]


def regular_bytes(path: str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of ``path`` when it is a regular file; None when it is
    missing, unreadable, a folder, a FIFO, a socket or a device."""
    try:
        return read_regular(path, limit)
    except OSError:
        return None


def config_keys(root: str, keys: tuple[str, ...]) -> dict[str, object] | None:
    """The top-level ``keys`` that ``root``'s ``memidex.toml`` sets (``{}`` when it sets
    none, or there is no such regular file); TOML is parsed only when a line starts with
    one of them. None when it is not TOML (the configuration will say so)."""
    data = regular_bytes(os.path.join(root, "memidex.toml"), 1 << 20) or b""
    prefixes = tuple(k.encode("ascii") for k in keys)
    if not any(line.lstrip().startswith(prefixes) for line in data.splitlines()):
        return {}
    from memidex.tomlfast import loads

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    table = loads(text)
    if table is None:
        import tomllib

        try:
            table = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError):  # (nested too deeply)
            return None
    return {k: table[k] for k in keys if k in table}
