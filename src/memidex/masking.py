"""Secrets and home-path redaction (SPEC §8), applied before anything is stored.

The secrets file (default ``.agent-qa/secrets.yaml``) maps names to values; each value is
replaced with ``[secret:<name>]``. Absolute home-directory paths become ``~``. Nothing
else is masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memidex.errors import ConfigError

__all__ = ["Masker"]

_HOME = re.compile(r"(?:/home/[^/\s]+|/Users/[^/\s]+|[A-Za-z]:\\Users\\[^\\\s]+|/root)(?=[/\\]|\b)")


@dataclass(frozen=True)
class Masker:
    secrets: tuple[tuple[str, str], ...] = ()  # (name, value), longest value first

    @classmethod
    def load(cls, path: Path) -> Masker:
        if not path.is_file():
            return cls()
        import yaml

        from memidex.records.yamlfast import yaml_loader

        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml_loader())  # noqa: S506
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the secrets file: {exc}") from None
        if data is None:
            return cls()
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str | int) for k, v in data.items()
        ):
            raise ConfigError(f"{path}: the secrets file must map names to values")
        pairs = [(k, str(v)) for k, v in data.items() if str(v)]
        pairs.sort(key=lambda kv: (-len(kv[1]), kv[0]))
        return cls(tuple(pairs))

    def mask(self, text: str) -> str:
        for name, value in self.secrets:
            if value in text:
                text = text.replace(value, f"[secret:{name}]")
        return _HOME.sub("~", text)
