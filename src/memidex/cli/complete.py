"""Shell completion of what memidex knows: record ids, products, kinds, test ids, run
ids and proposal ids (``memidex --install-completion``). Each completer reads file names
and small state files only — never the index, never a record's text — and answers
nothing rather than fail."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["kinds", "products", "proposal_ids", "record_ids", "run_ids", "test_ids"]


def _config(ctx: Any) -> Any:
    """The configuration for the command being completed (``--root`` if given), or None."""
    from memidex.config import load_config

    root = None
    node = ctx
    while node is not None:
        given = (getattr(node, "params", None) or {}).get("root")
        if given:
            root = Path(given)
            break
        node = node.parent
    try:
        return load_config(root, strict=False)
    except Exception:  # completion never fails loudly
        return None


def _matching(items: Iterable[str], incomplete: str) -> list[str]:
    return sorted({i for i in items if i.startswith(incomplete)})[:200]


def kinds(incomplete: str) -> list[str]:
    from memidex.records.vocab import KINDS

    return _matching(KINDS, incomplete)


def record_ids(ctx: Any, incomplete: str) -> list[str]:
    config = _config(ctx)
    if config is None:
        return []
    folder = config.knowledge_path / "records"
    try:
        names = [p.name.removesuffix(".md") for p in folder.glob("*/*.md")]
    except OSError:
        return []
    return _matching(names, incomplete)


def _products(config: Any) -> set[str]:
    out = {config.product} if config.product else set()
    try:
        counters = json.loads((config.state_path / "build-ordinals.json").read_text("utf-8"))
        out |= set((counters.get("products") or {}).keys())
    except (OSError, ValueError, AttributeError):
        pass
    try:
        out |= {p.name.removeprefix("tests-").removesuffix(".json")
                for p in (config.state_path / "runs").glob("tests-*.json")}
    except OSError:
        pass
    return {p for p in out if isinstance(p, str)}


def products(ctx: Any, incomplete: str) -> list[str]:
    config = _config(ctx)
    return [] if config is None else _matching(_products(config), incomplete)


def test_ids(ctx: Any, incomplete: str) -> list[str]:
    """The test ids the tests files of every product know."""
    config = _config(ctx)
    if config is None:
        return []
    out: set[str] = set()
    try:
        files = list((config.state_path / "runs").glob("tests-*.json"))
    except OSError:
        return []
    for path in files:
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        tests = data.get("tests") if isinstance(data, dict) else None
        if isinstance(tests, dict):
            out |= {t for t in tests if isinstance(t, str)}
    return _matching(out, incomplete)


def run_ids(ctx: Any, incomplete: str) -> list[str]:
    config = _config(ctx)
    if config is None:
        return []
    try:
        names = [p.name.removesuffix(".result.json")
                 for p in (config.state_path / "runs").glob("*.result.json")]
    except OSError:
        return []
    return _matching(names, incomplete)


def proposal_ids(ctx: Any, incomplete: str) -> list[str]:
    config = _config(ctx)
    if config is None:
        return []
    folder = config.knowledge_path / "queue" / "proposals"
    try:
        names = [p.name.removesuffix(".json") for p in folder.glob("p-*.json")]
    except OSError:
        return []
    return _matching(names, incomplete)
