"""The run counters, ``<state_dir>/build-ordinals.json`` (SPEC §1, §3).

The shape of the file::

    {"products": {"shop-web": {"next": 42, "builds": {"v1.4.2": 36},
                               "pending": {"r-0042": 42}}}}

``next`` is the ordinal the product's next run gets (the first run gets 1), so the
product's *current* ordinal — the last one allocated — is ``next - 1``, and 0 for a
product with no run yet (or no file at all). ``builds`` maps a build tag to the first
ordinal that used it. ``pending`` remembers the ordinal reserved for a run that may not
be frozen yet: a kill before the freeze gives the same ordinal back to the same run, and
never to another. Other keys are kept as they are.

:class:`Counters` is the one owner: :meth:`Counters.load` reads and checks the file (a
file that is not of this shape is an error naming it — a record's window is never
computed from a guess), :meth:`Counters.reserve` allocates a run's ordinal (pure) and
:meth:`Counters.save` writes it through the writer it is given. An ingest reads the file
once and writes it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memidex.config import Config
from memidex.errors import StateDamagedError
from memidex.plain import Frozen, set_field
from memidex.store.fsio import dump_json
from memidex.store.state import StateWriter, load_state

TYPE_CHECKING = False  # not typing's: a one-shot command imports no typing (~2 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_ORDINAL", "ORDINALS_FILE", "Counters", "ProductCounters", "current_ordinal",
           "ordinals_path"]

ORDINALS_FILE = "build-ordinals.json"
MAX_ORDINAL = 2**63 - 1


def ordinals_path(config: Config) -> Path:
    return config.state_path / ORDINALS_FILE


def _ordinal(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        0 <= value <= MAX_ORDINAL


class ProductCounters(Frozen):
    """One product's counters."""

    __slots__ = ("next", "builds", "pending")
    next: int
    builds: Mapping[str, int]
    pending: Mapping[str, int]

    def __init__(self, next: int = 1, builds: Mapping[str, int] | None = None,
                 pending: Mapping[str, int] | None = None) -> None:
        set_field(self, "next", next)
        set_field(self, "builds", {} if builds is None else builds)
        set_field(self, "pending", {} if pending is None else pending)

    @property
    def current(self) -> int:
        """The last ordinal allocated (0: none)."""
        return self.next - 1

    def build_order(self) -> list[str]:
        """The product's build tags in build order: by the first ordinal that used each."""
        return sorted(self.builds, key=lambda tag: (self.builds[tag], tag))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"next": self.next, "builds": dict(self.builds)}
        if self.pending:
            out["pending"] = dict(self.pending)
        return out


class Counters(Frozen):
    """The whole file: every product's counters (and any other key, kept)."""

    __slots__ = ("path", "products", "extra")
    path: Path
    products: Mapping[str, ProductCounters]
    extra: Mapping[str, Any]

    def __init__(self, path: Path, products: Mapping[str, ProductCounters] | None = None,
                 extra: Mapping[str, Any] | None = None) -> None:
        set_field(self, "path", path)
        set_field(self, "products", {} if products is None else products)
        set_field(self, "extra", {} if extra is None else extra)

    @classmethod
    def load(cls, config: Config) -> Counters:
        path = ordinals_path(config)
        data = load_state(path, what="run counters file")
        if data is None:
            return cls(path)
        raw = data.get("products", {})
        if not isinstance(raw, dict):
            raise _bad(path, "`products` must be a mapping of product names")
        products: dict[str, ProductCounters] = {}
        for name, entry in raw.items():
            if not isinstance(entry, dict):
                raise _bad(path, f"`products.{name}` must be a mapping")
            nxt = entry.get("next", 1)
            if not _ordinal(nxt) or nxt < 1:
                raise _bad(path, f"`products.{name}.next` must be a whole number from 1 to "
                                 f"{MAX_ORDINAL}")
            builds = entry.get("builds", {})
            if not isinstance(builds, dict) or not all(_ordinal(v) for v in builds.values()):
                raise _bad(path, f"`products.{name}.builds` must map build tags to ordinals")
            pending = entry.get("pending", {})
            if not isinstance(pending, dict) or not all(_ordinal(v) for v in pending.values()):
                raise _bad(path, f"`products.{name}.pending` must map run ids to ordinals")
            products[str(name)] = ProductCounters(nxt, dict(builds), dict(pending))
        extra = {k: v for k, v in data.items() if k != "products"}
        return cls(path, products, extra)

    def product(self, name: str) -> ProductCounters:
        return self.products.get(name) or ProductCounters()

    def reserve(self, product: str, run_id: str, *, floor: int,
                build_tag: str | None) -> tuple[Counters, int]:
        """The counters with ``run_id``'s ordinal reserved, and that ordinal: the one
        already reserved for it, else the next one after ``floor`` (the highest ordinal
        the product's records name) — its build tag mapped to its first ordinal. Pure."""
        pc = self.product(product)
        held = pc.pending.get(run_id)
        n = held if held is not None else max(pc.next, floor + 1)
        builds = dict(pc.builds)
        if build_tag is not None and (build_tag not in builds or builds[build_tag] > n):
            builds[build_tag] = n
        new = ProductCounters(max(pc.next, n + 1), builds, {**pc.pending, run_id: n})
        return self.replace(products={**self.products, product: new}), n

    def settle(self, product: str, done: set[str]) -> Counters:
        """The counters without the reservations of runs that are frozen (``done``)."""
        pc = self.product(product)
        pending = {k: v for k, v in pc.pending.items() if k not in done}
        if pending == dict(pc.pending):
            return self
        return self.replace(products={**self.products, product: pc.replace(pending=pending)})

    def save(self, writer: StateWriter) -> None:
        data = {**self.extra,
                "products": {k: v.to_json() for k, v in sorted(self.products.items())}}
        writer.put(self.path, dump_json(data, indent=1))


def _bad(path: Path, why: str) -> StateDamagedError:
    return StateDamagedError(f"{path}: {why}",
                             hint='expected {"products": {"<product>": {"next": <ordinal>, '
                                  '"builds": {"<tag>": <ordinal>}}}}')


def current_ordinal(config: Config, product: str, floor: int = 0) -> int:
    """The last run ordinal allocated to ``product`` (``next - 1``, 0 if none) — and never
    below ``floor``, the highest ordinal the product's records name: a clone without the
    local counters (a fresh checkout, a CI machine) continues after the team's runs."""
    return max(Counters.load(config).product(product).current, floor)
