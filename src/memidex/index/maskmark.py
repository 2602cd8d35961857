"""Which secrets the index's text was masked with — kept as nothing a guess is cheap to
check against.

The index stores each record as :func:`memidex.masking.index_view` masks it under the
secrets file of the moment. When the secrets change, every row may be masked wrong: a
secret declared since is still in the full-text index (a search would confirm a guess,
and its bytes are in the file), and one withdrawn still hides words a record holds. So
the index's meta keeps ``secrets`` (:func:`mark`): the secrets file's stat at the last
look and a salted ``scrypt`` digest (memory-hard, ~65 ms; none for no secrets) of the
secrets it held — not of the file's bytes, so a comment or a re-ordering changes nothing.

Each refresh stats the file (:func:`compare`, one ``stat``). Another stat — the file
rewritten, touched, replaced, made or removed — reads the secrets and compares digests:
the same secrets only update the stat; others mean :class:`MaskChanged`, and the facade
rebuilds the index into a new file swapped in whole, so no page of the old one keeps a
secret. A stat too recent to trust (the file may change again within its timestamp's
tick, keeping size and times) is not kept: the next look compares the digest again.
"""

from __future__ import annotations

import json
import os
import time

from memidex.masking import RACY_NS, Masker, secrets_path

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["KEY", "MaskChanged", "compare", "mark", "same_secrets", "secrets_mark",
           "secrets_path"]

KEY = "secrets"
"""The index meta key."""
_ABSENT = "absent"
"""The ``stat`` of a secrets file that does not exist."""


class MaskChanged(Exception):
    """The secrets differ from those the index was masked with: rebuild it."""


def _stat(path: Path) -> list[int] | str:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return _ABSENT
    except OSError:
        return []  # not trusted: compared by its secrets (Masker.load says what is wrong)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _digest(masker: Masker, salt: bytes) -> str:
    """The secrets' digest under ``salt``; ``""`` for none (no scrypt: the common case)."""
    if not masker.secrets:
        return ""
    import hashlib

    made = json.dumps(sorted(masker.secrets), ensure_ascii=False).encode("utf-8")
    # memory-hard and slow on purpose: the digest must not let someone who can read the
    # index test guesses at a short secret quickly (computed when the secrets file's stat
    # moved, and by a rebuild)
    return hashlib.scrypt(made, salt=salt, n=1 << 14, r=8, p=1, maxmem=1 << 25,
                          dklen=32).hex()


def _parsed(stored: str | None) -> tuple[dict[str, object] | None, bytes | None]:
    """A stored mark and its salt; (None, None) for none, or one that does not parse (an
    index or a push from before the marks: masked with no secrets)."""
    try:
        old = json.loads(stored) if stored else None
    except ValueError:
        return None, None
    if not isinstance(old, dict):
        return None, None
    try:
        salt = bytes.fromhex(old["salt"])
    except (KeyError, TypeError, ValueError):
        salt = None
    return old, salt or None


def _mark(st: list[int] | str, salt: bytes, digest: str, now_ns: int | None) -> str:
    now = time.time_ns() if now_ns is None else now_ns
    if isinstance(st, list) and (not st or max(st[3], st[4]) >= now - RACY_NS):
        st = []  # too recent (or unreadable) to vouch for the content: compared next time
    return json.dumps({"stat": st, "salt": salt.hex(), "digest": digest})


def mark(path: Path, *, now_ns: int | None = None) -> str:
    """The ``secrets`` meta value for the secrets file ``path`` as it is now, under a new
    salt (its stat taken before it is read, so a change meanwhile makes the next look
    compare again)."""
    st = _stat(path)
    salt = os.urandom(16)
    return _mark(st, salt, _digest(Masker.load(path), salt), now_ns)


def compare(path: Path, stored: str | None, *, now_ns: int | None = None) -> str | None:
    """None: the secrets file is as the index last saw it (the same stat). Else the new
    ``secrets`` meta value to write: the same secrets under another stat (or, for an
    index from before this check, none at all). Raises :class:`MaskChanged` when the
    secrets differ from those the index was masked with."""
    st = _stat(path)
    old, salt = _parsed(stored)
    if old is not None and old.get("stat") == st and st != []:
        return None
    masker = Masker.load(path)  # none when absent; a dangling link: ConfigError
    if old is None:
        if masker.secrets:
            raise MaskChanged
        return mark(path, now_ns=now_ns)
    if salt is None:
        raise MaskChanged
    digest = _digest(masker, salt)
    if digest != old.get("digest"):
        raise MaskChanged
    new = _mark(st, salt, digest, now_ns)  # the same salt: unchanged, nothing to write
    return None if new == stored else new


def secrets_mark(masker: Masker) -> str:
    """The mark of ``masker``'s secrets alone, under a new salt (the team index keeps one
    a branch: no stat there)."""
    salt = os.urandom(16)
    return json.dumps({"salt": salt.hex(), "digest": _digest(masker, salt)})


def same_secrets(masker: Masker, stored: str | None) -> bool:
    """Do ``masker``'s secrets make the digest of the mark ``stored`` (from
    :func:`secrets_mark` or :func:`mark`)? No mark (a push from before the marks) counts
    as masked with none."""
    old, salt = _parsed(stored)
    if old is None:
        return not masker.secrets
    return salt is not None and _digest(masker, salt) == old.get("digest")
