"""The two parts of a record file laid out as :func:`memidex.records.codec.dump_record`
writes it, for the fast readers (:mod:`memidex.records.canonical`,
:mod:`memidex.index.rowread`): :func:`canonical_parts`. Light to import: the YAML
reader's comment stripping is imported only for a front matter that has a ``#``."""

from __future__ import annotations

__all__ = ["canonical_parts"]


def canonical_parts(text: str) -> tuple[str, str] | None:
    """(front matter, comments taken out as the fast YAML reader takes them out; body,
    stripped as the codec strips it) of a file that opens with ``---``, closes its front
    matter with a ``---`` line and holds no CR in it nor NUL in its body; None for any
    other text (the full path reads it, and names its problem)."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        return None
    front = text[4 : end + 1]
    if "\r" in front:
        return None  # CRLF, or a lone CR: the full path's
    if "#" in front:
        from memidex.records.yamlfast import _without_comments

        stripped = _without_comments(front)
        if stripped is None:
            return None
        front = stripped
    body = text[end + 5 :].strip("\n").rstrip()
    if "\x00" in body:
        return None
    return front, body
