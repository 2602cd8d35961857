"""Secrets and home-path redaction (SPEC §8), applied before anything is stored.

The secrets file (default ``.agent-qa/secrets.yaml``) maps names to values; each value is
replaced with ``[secret:<name>]``. The machine's home directories — ``$HOME`` and the
home folder of every account under ``/home/``, ``/Users/`` or ``/root`` — and Windows
``X:\\Users\\<name>`` paths become ``~``; an app route such as ``/home/dashboard`` is
data and stays. Nothing else is masked.

:meth:`Masker.mask_record` is the one write boundary for a record: every string it stores
(title, body, anchors, scope keys and values, evidence and history strings) is masked
before its id is computed, and a product name holding a secret is refused.
:meth:`Masker.mask_hits`, :meth:`Masker.mask_summaries`, :meth:`Masker.mask_json` and
:meth:`Masker.mask_shown` mask secrets in what memidex prints (a secret typed by hand
into a committed record), and :func:`index_view` what the index stores of a record. A
secret is found also where other whitespace, control or invisible characters split it
than its own (what a printer turns into a space would rebuild it on screen);
:meth:`Masker.load` reads the secrets file only when it exists and caches it.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from functools import lru_cache
from pathlib import Path

from memidex.errors import ConfigError, InvalidInputError, RecordError
from memidex.plain import Frozen, set_field

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from memidex.config import Config
    from memidex.records.model import Evidence, HistoryEntry, Record

    _T = TypeVar("_T")

__all__ = ["RACY_NS", "Masker", "home_pattern", "index_view", "secrets_path"]

_WINDOWS_HOME = r"[A-Za-z]:\\Users\\[^\\\s]+"
_HOME_ROOTS = ("/home/", "/Users/")


def index_view(record: Record, secrets_file: Path) -> Record:
    """``record`` as the index stores it (:meth:`Masker.for_index`), under the secrets of
    ``secrets_file`` (read once while it does not change). The index's row projection
    calls it for every record file, so a rebuild and a refresh store the same."""
    return Masker.load(secrets_file).for_index(record)


@lru_cache(maxsize=8)
def home_pattern(home: str | None) -> re.Pattern[str]:
    """The home folders of this machine: ``home`` (``$HOME``) and each account's home
    under ``/home/``, ``/Users/`` or at ``/root``, each ending at a path boundary; and
    Windows user folders."""
    alts = [re.escape(h) for h in _homes(home)]
    alts.append(_WINDOWS_HOME)
    return re.compile(rf"(?:{'|'.join(alts)})(?![A-Za-z0-9._-])")


@lru_cache(maxsize=8)
def _homes(home: str | None) -> tuple[str, ...]:
    """The home folders :func:`home_pattern` matches (besides Windows ones), longest
    first: a text holding none of them and no backslash holds no match."""
    homes: set[str] = set()
    if home and home.startswith("/") and home.rstrip("/"):
        homes.add(home.rstrip("/"))
    try:
        import pwd

        for entry in pwd.getpwall():
            d = entry.pw_dir.rstrip("/")
            if d == "/root" or (d.startswith(_HOME_ROOTS) and d.count("/") >= 2):
                homes.add(d)
    except (ImportError, OSError, KeyError):  # no account database (Windows, a sandbox)
        pass
    return tuple(sorted(homes, key=lambda h: (-len(h), h)))


_SECRET_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*): (.+)")
_QUOTED = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"')


def _read_simple(text: str) -> dict[str, str] | None:
    """``NAME: value`` lines (plain or JSON-quoted values), without importing PyYAML;
    None for anything else (PyYAML then reads the file)."""
    import json

    from memidex.records.yamlfast import is_plain_str

    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = _SECRET_LINE.fullmatch(line)
        if m is None or m.group(1) in out or " #" in line:
            return None
        name, value = m.groups()
        if _QUOTED.fullmatch(value):
            out[name] = json.loads(value)
        elif is_plain_str(value):
            out[name] = value
        else:
            return None
    return out


_LOADED: dict[str, tuple[tuple[int, ...], Masker]] = {}
RACY_NS = 2_000_000_000
"""A secrets file changed this close to a read may change again within its mtime tick."""


def secrets_path(config: Config) -> Path:
    """The secrets file ``config`` names (``secrets_file``, from the repository root)."""
    return config.root / config.secrets_file

_ESCAPED_SEP = (r"(?:\s|[\x00-\x1f\x7f-\xa0\u00ad\u200b-\u200f\u2028-\u202f\u2060-\u206f"
                r"\ufeff]|\\[tnr0abefv _NLP]|\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}"
                r"|\\U[0-9a-fA-F]{8})+")
"""Between two words of a secret in a file's text: separators, or YAML/JSON escapes."""


def _is_format(ch: str) -> bool:
    import unicodedata

    return unicodedata.category(ch) == "Cf"


def _normalised(text: str, *, drop_format: bool) -> tuple[str, list[int]]:
    """``text`` with each run of separators as one space (``drop_format``: format
    characters left out instead) and every other character as NFKC reads it, and for each
    of its characters the offset in ``text`` it starts at."""
    from unicodedata import normalize

    chars: list[str] = []
    starts: list[int] = []
    in_run = False
    for i, ch in enumerate(text):
        if ch.isprintable() and ch != " ":
            folded = normalize("NFKC", ch) if ch > "\x7f" else ch  # ｈ as h, ﬁ as fi
            if folded.isspace():  # (an ideographic space is not printable already)
                folded = " "
            chars.extend(folded)
            starts.extend([i] * len(folded))
            in_run = False
        elif drop_format and _is_format(ch):
            continue
        elif not in_run:
            chars.append(" ")
            starts.append(i)
            in_run = True
    return "".join(chars), starts


def _nfkc_normal(text: str) -> bool:
    """Does NFKC leave ``text`` as it is (no fullwidth letter, ligature, …)? (C speed.)"""
    from unicodedata import is_normalized

    return is_normalized("NFKC", text)


def _normal_value(value: str, *, drop_format: bool) -> str:
    """A secret as :func:`_normalised` reads it (trimmed)."""
    return _normalised(value, drop_format=drop_format)[0].strip()


class Masker(Frozen):
    """The secrets to mask: ``(name, value)`` pairs, the longest value first."""

    __slots__ = ("secrets",)
    secrets: tuple[tuple[str, str], ...]

    def __init__(self, secrets: tuple[tuple[str, str], ...] = ()) -> None:
        set_field(self, "secrets", secrets)

    @classmethod
    def load(cls, path: Path) -> Masker:
        """The secrets in ``path`` (none when it does not exist; a :class:`ConfigError`
        when it cannot be read, a dangling symlink included); cached by its stat, so
        a long-lived process reads it again only when it changed — and always while its
        last change is too recent to vouch for (written again within its timestamp's
        tick, a file of the same size keeps the same stat)."""
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.islink(path):  # the secrets exist somewhere: never "no secrets"
                raise ConfigError(f"{path}: the secrets file is a symlink to nothing",
                                  hint="mount or restore the file it points to") from None
            return cls()
        except OSError as exc:  # a symlink loop, a folder that cannot be searched
            raise ConfigError(f"{path}: cannot read the secrets file: {exc.strerror}"
                              ) from None
        key = str(path)
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = _LOADED.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        masker = cls._read(path)
        if max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RACY_NS:
            _LOADED[key] = (stamp, masker)
        else:
            _LOADED.pop(key, None)
        return masker

    @classmethod
    def _read(cls, path: Path) -> Masker:
        from memidex.fileread import NotRegularFile, read_regular

        try:  # never a wait on a FIFO (nor "no secrets" for one: that unmasks them all)
            text = read_regular(str(path)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: cannot read the secrets file: {exc}") from None
        except IsADirectoryError:
            raise ConfigError(f"{path}: the secrets file is a folder") from None
        except NotRegularFile:
            raise ConfigError(f"{path}: the secrets file is not a regular file",
                              hint="make it a YAML file of NAME: value lines") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the secrets file: {exc.strerror}"
                              ) from None
        data: Any = _read_simple(text)
        if data is None:
            import yaml

            from memidex.records.yamlfast import yaml_loader

            try:
                data = yaml.load(text, Loader=yaml_loader())  # noqa: S506
            except yaml.YAMLError as exc:
                raise ConfigError(f"{path}: cannot read the secrets file: {exc}") from None
        if data is None:
            return cls()
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool)
            for k, v in data.items()
        ):
            raise ConfigError(f"{path}: the secrets file must map names to values")
        pairs = [(k, str(v)) for k, v in data.items() if str(v)]
        pairs.sort(key=lambda kv: (-len(kv[1]), kv[0]))
        return cls(tuple(pairs))

    def mask_secrets(self, text: str) -> str:
        """Each secret in ``text`` as ``[secret:<name>]`` — also where it is split by other
        whitespace, control or invisible characters than its own (``open\tsesame 42``,
        ``open\u200bsesame 42``, ``open  sesame 42`` for ``open sesame 42``), or spelled
        in characters NFKC reads as its own (fullwidth letters, ligatures): what a printer
        turns into one space, or into nothing, rebuilds the secret on screen."""
        for name, value in self.secrets:
            if value in text:
                text = text.replace(value, f"[secret:{name}]")
        if self.secrets and (not text.isprintable() or "  " in text or not text.isascii()
                             and not _nfkc_normal(text)):
            text = self._mask_loose(text)
        return text

    def holds_secret(self, text: str) -> bool:
        return self.mask_secrets(text) != text

    def _mask_loose(self, text: str) -> str:
        """The secrets found in ``text`` once each run of separators (whitespace, control
        and format characters) reads as one space — and once format characters (ZWSP,
        soft hyphen, …) read as nothing."""
        spans: list[tuple[int, int, str]] = []
        formats = any(_is_format(ch) for ch in text if not ch.isprintable())
        for drop_format in (False, True) if formats else (False,):
            norm, starts = _normalised(text, drop_format=drop_format)
            for name, value in self.secrets:
                want = _normal_value(value, drop_format=drop_format)
                if not want:
                    continue
                at = norm.find(want)
                while at >= 0:
                    end = at + len(want)
                    spans.append((starts[at], starts[end] if end < len(starts) else len(text),
                                  name))
                    at = norm.find(want, end)
        if not spans:
            return text
        out: list[str] = []
        pos = 0
        for start, end, name in sorted(spans):
            if start < pos:  # overlaps the span masked before it
                continue
            out += [text[pos:start], f"[secret:{name}]"]
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def mask(self, text: str) -> str:
        """Secrets, then home paths."""
        if self.secrets:
            text = self.mask_secrets(text)
        if "\\" in text:
            return home_pattern(os.environ.get("HOME")).sub("~", text)
        if "/" in text:
            home = os.environ.get("HOME")
            for h in _homes(home):  # the pattern only once a home folder is in the text
                if h in text:
                    return home_pattern(home).sub("~", text)
        return text

    # --- output: a secret typed by hand into a committed record, masked where printed --
    # Each returns its argument itself when there are no secrets (the common case).

    def mask_hits(self, hits: list[_T]) -> list[_T]:
        """Search hits (:class:`memidex.search.ranking.SearchHit`): title, snippet, anchors."""
        if not self.secrets:
            return hits
        m = self.mask_secrets
        items: list[Any] = hits
        return [h.replace(title=m(h.title), snippet=m(h.snippet),
                          anchors=tuple(m(a) for a in h.anchors))
                for h in items]

    def mask_summaries(self, rows: list[_T]) -> list[_T]:
        """Listing rows (:class:`memidex.records.shape.RecordSummary`): id, path, title,
        anchors."""
        if not self.secrets:
            return rows
        m = self.mask_secrets
        items: list[Any] = rows
        return [r.replace(title=m(r.title), anchor=m(r.anchor), path=m(r.path),
                          anchors=tuple(m(a) for a in r.anchors))
                for r in items]

    def mask_json(self, data: Any) -> Any:
        """JSON data (a frozen run as ``runs show`` reads it): every string masked, keys
        included."""
        if not self.secrets:
            return data
        m = self.mask_secrets
        if isinstance(data, str):
            return m(data)
        if isinstance(data, list):
            return [self.mask_json(v) for v in data]
        if isinstance(data, dict):
            return {m(k) if isinstance(k, str) else k: self.mask_json(v)
                    for k, v in data.items()}
        return data

    def mask_shown(self, shown: _T) -> _T:
        """A shown record (:class:`memidex.app.results.ShownRecord`): its text — a secret
        split by a YAML escape (``open\\tsesame 42`` in a quoted title) included — and the
        record parsed again from the masked text, every field masked again (a field the
        mask of the text left unreadable, or whose escapes it could not see)."""
        if not self.secrets:
            return shown
        s: Any = shown
        text = self._mask_escaped(self.mask_secrets(s.text))
        record = s.record
        if text != s.text:
            from memidex.records.codec import parse_record

            with contextlib.suppress(RecordError):  # unreadable: mask field by field
                record = parse_record(text, s.path)
        record = self._masked_fields(record)
        if text == s.text and record == s.record:
            return shown
        masked: _T = s.replace(record=record, text=text)
        return masked

    def _mask_escaped(self, text: str) -> str:
        """Secrets in a file's text whose separators are written as escapes (``\\t``,
        ``\\n``, ``\\u200b``, …) or other separators."""
        if "\\" not in text:
            return text
        for name, value in self.secrets:
            parts = value.split()
            if len(parts) < 2 or parts[0] not in text:
                continue
            pattern = _ESCAPED_SEP.join(re.escape(p) for p in parts)
            text = re.sub(pattern, f"[secret:{name}]", text)
        return text

    def _masked_fields(self, r: Record) -> Record:
        """``r`` with the secrets in every string it holds masked, its id kept."""
        from dataclasses import replace  # records are dataclasses; off the search path

        m = self.mask_secrets

        def opt(v: str | None) -> str | None:
            return None if v is None else m(v)

        new = replace(
            r, title=m(r.title), body=m(r.body), anchor=m(r.anchor),
            anchors=tuple(sorted({m(a) for a in r.anchors})),
            scope=tuple((k, m(v) if isinstance(v, str) else v) for k, v in r.scope),
            evidence=tuple(replace(e, observed=opt(e.observed), test=opt(e.test),
                                   check=opt(e.check), artifact=opt(e.artifact))
                           for e in r.evidence),
            history=tuple(replace(h, title=m(h.title), body=m(h.body),
                                  anchors=None if h.anchors is None
                                  else tuple(sorted({m(a) for a in h.anchors})))
                          for h in r.history),
        )
        return r if new == r else new

    def for_index(self, r: Record) -> Record:
        """``r`` as the index stores it: secrets masked in every text it is searched or
        shown by (title, body, anchors, scope, earlier versions); its id and path kept.
        So a secret typed by hand into a record is not in the index either, and a search
        for it finds nothing — search is no oracle for a guess."""
        return self._masked_fields(r) if self.secrets else r

    # --- the write boundary ------------------------------------------------------------

    def mask_record(self, r: Record) -> Record:
        """``r`` with every string it stores masked and its id computed from the masked
        subject. A product name holding a secret is refused (an identifier, not text)."""
        from dataclasses import replace

        from memidex.records.ids import record_id

        if self.holds_secret(r.product):
            raise InvalidInputError("the product name holds a value from the secrets file",
                                    hint="a product is an identifier: use another name")
        m = self.mask
        scope = tuple((m(k), m(v) if isinstance(v, str) else v) for k, v in r.scope)
        anchor = m(r.anchor)
        title, body = m(r.title), m(r.body)
        anchors = tuple(sorted({m(a) for a in r.anchors} - {anchor}))
        scope = tuple(sorted(dict(scope).items()))
        evidence = tuple(self._evidence(e) for e in r.evidence)
        history = tuple(self._history(h) for h in r.history)
        if (title == r.title and body == r.body and anchor == r.anchor
                and anchors == r.anchors and scope == r.scope and evidence == r.evidence
                and history == r.history):
            return r  # nothing to mask (the usual case): no copy
        new = replace(r, title=title, body=body, anchor=anchor, anchors=anchors,
                      scope=scope, evidence=evidence, history=history)
        return replace(new, id=record_id(new.kind, new.anchor, new.product,
                                         dict(new.scope)))

    def _evidence(self, e: Evidence) -> Evidence:
        """``e`` with its strings masked and its extra keys sorted (``e`` itself when that
        changes nothing)."""
        m = self.mask

        def s(v: str | None) -> str | None:
            return None if v is None else m(v)

        extra = tuple(sorted(dict(
            (m(k), m(v) if isinstance(v, str) else v) for k, v in e.extra).items()))
        run, test, observed = s(e.run), s(e.test), s(e.observed)
        check, artifact = s(e.check), s(e.artifact)
        if (run == e.run and test == e.test and observed == e.observed and check == e.check
                and artifact == e.artifact and extra == e.extra):
            return e
        from dataclasses import replace

        return replace(e, run=run, test=test, observed=observed, check=check,
                       artifact=artifact, extra=extra)

    def _history(self, h: HistoryEntry) -> HistoryEntry:
        m = self.mask
        anchors = None if h.anchors is None else tuple(sorted({m(a) for a in h.anchors}))
        title, body = m(h.title), m(h.body)
        if title == h.title and body == h.body and anchors == h.anchors:
            return h
        from dataclasses import replace

        return replace(h, title=title, body=body, anchors=anchors)
