"""Reading the run counters, ``<state_dir>/build-ordinals.json`` (SPEC §1, §3). Read-only:
the run ingest (the learning step) allocates ordinals and writes the file.

The shape this module assumes, and the learning step writes::

    {"products": {"shop-web": {"next": 42, "builds": {"v1.4.2": 36}}}}

``next`` is the ordinal the product's next run gets (the first run gets 1), so the
product's *current* ordinal — the last one allocated — is ``next - 1``, and 0 for a
product with no run yet (or no file at all). ``builds`` maps a build tag to the first
ordinal that used it. Other keys are ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memidex.config import Config
from memidex.errors import InvalidInputError

__all__ = ["ORDINALS_FILE", "MAX_ORDINAL", "current_ordinal", "ordinals_path",
           "read_ordinals"]

ORDINALS_FILE = "build-ordinals.json"
MAX_ORDINAL = 2**63 - 1


def ordinals_path(config: Config) -> Path:
    return config.state_path / ORDINALS_FILE


def _bad(path: Path, why: str) -> InvalidInputError:
    return InvalidInputError(f"{path}: {why}",
                             hint='expected {"products": {"<product>": {"next": <ordinal>, '
                                  '"builds": {"<tag>": <ordinal>}}}}')


def _ordinal(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        0 <= value <= MAX_ORDINAL


def read_ordinals(config: Config) -> dict[str, dict[str, Any]]:
    """Every product's counters (``{}`` when there is no file). A file that is not valid
    JSON or not of the documented shape is an :class:`InvalidInputError`: a record's window
    is never computed from a guess."""
    path = ordinals_path(config)
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _bad(path, f"cannot read it ({exc.strerror})") from None
    except ValueError as exc:  # bad UTF-8 or bad JSON
        raise _bad(path, f"not valid JSON ({exc})") from None
    products = data.get("products", {}) if isinstance(data, dict) else None
    if not isinstance(products, dict):
        raise _bad(path, "`products` must be a mapping of product names")
    for name, entry in products.items():
        if not isinstance(entry, dict):
            raise _bad(path, f"`products.{name}` must be a mapping")
        nxt = entry.get("next", 1)
        if not _ordinal(nxt) or nxt < 1:
            raise _bad(path, f"`products.{name}.next` must be a whole number from 1 to "
                             f"{MAX_ORDINAL}")
        builds = entry.get("builds", {})
        if not isinstance(builds, dict) or not all(_ordinal(v) for v in builds.values()):
            raise _bad(path, f"`products.{name}.builds` must map build tags to ordinals")
    return products


def current_ordinal(config: Config, product: str, floor: int = 0) -> int:
    """The last run ordinal allocated to ``product`` (``next - 1``, 0 if none) — and never
    below ``floor``, the highest ordinal the product's records name: a clone without the
    local counters (a fresh checkout, a CI machine) continues after the team's runs."""
    entry = read_ordinals(config).get(product)
    counted = 0 if entry is None else int(entry.get("next", 1)) - 1
    return max(counted, floor)
