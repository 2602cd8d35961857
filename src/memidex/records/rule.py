"""A policy as a value: the rule people wrote in ``policies/*.yaml`` (read by
:mod:`memidex.records.policy`), kept apart from the record model so that a brief, which
serves policies from the index, imports no record classes."""

from __future__ import annotations

from memidex.plain import Frozen, set_field

__all__ = ["Policy"]


class Policy(Frozen):
    """A rule people wrote. ``anchors`` are glob patterns (``page:/checkout*``)."""

    __slots__ = ("id", "rule", "severity", "products", "anchors", "path", "line")
    id: str
    rule: str
    severity: str
    products: tuple[str, ...]
    anchors: tuple[str, ...]
    path: str
    line: int

    def __init__(self, id: str, rule: str, severity: str = "must", products: tuple[str, ...] = (),
                 anchors: tuple[str, ...] = (), path: str = "", line: int = 1) -> None:
        set_field(self, "id", id)
        set_field(self, "rule", rule)
        set_field(self, "severity", severity)
        set_field(self, "products", products)
        set_field(self, "anchors", anchors)
        set_field(self, "path", path)
        set_field(self, "line", line)

    def applies_to(self, product: str, anchors: tuple[str, ...] | list[str] | None) -> bool:
        """True when the policy covers ``product`` and (if it names anchors) one of ``anchors``.

        A policy with no anchor patterns applies to every test of its products.
        """
        from fnmatch import fnmatchcase

        if self.products and product not in self.products:
            return False
        if not self.anchors:
            return True
        return any(fnmatchcase(a, pat) for pat in self.anchors for a in anchors or ())
