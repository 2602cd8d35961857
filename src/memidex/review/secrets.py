"""The secret scan of committed records (SPEC §8), for ``knowledge check`` and
``knowledge review``.

Two sources of findings, each reported as ``path:line: possible <kind>: <masked>``:

* the values of the secrets file (``secrets_file``, default ``.agent-qa/secrets.yaml``):
  a value typed by hand into a record (memidex masks them on write, a person may not);
* well-known token shapes, through the maintained ``detect-secrets`` library (cloud keys,
  private keys, JWTs, GitHub/GitLab/Slack and other service tokens, basic-auth URLs), and
  high-entropy strings inside evidence's ``observed`` text.

``detect-secrets`` is imported only here, and this module only by ``check`` and
``review``. The value is never printed whole: the first four characters, then ``…`` and a
short SHA-256 (``sha256:<12 hex>``) that can be put in the allow-list in
``memidex.toml`` — ``[secrets] allow = ["sha256:…", "a literal value", …]`` — for a
false positive.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memidex.config import Config
from memidex.errors import Problem

__all__ = ["Finding", "allow_list", "fingerprint", "mask", "scan_text", "scan_records",
           "secret_problems"]

_PLUGINS = (
    ("aws", "AWSKeyDetector"), ("azure_storage_key", "AzureStorageKeyDetector"),
    ("basic_auth", "BasicAuthDetector"), ("discord", "DiscordBotTokenDetector"),
    ("github_token", "GitHubTokenDetector"), ("gitlab_token", "GitLabTokenDetector"),
    ("jwt", "JwtTokenDetector"), ("mailchimp", "MailchimpDetector"),
    ("npm", "NpmDetector"), ("openai", "OpenAIDetector"),
    ("private_key", "PrivateKeyDetector"), ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"), ("slack", "SlackDetector"),
    ("square_oauth", "SquareOAuthDetector"), ("stripe", "StripeDetector"),
    ("twilio", "TwilioKeyDetector"), ("artifactory", "ArtifactoryDetector"),
)
"""The token-shape detectors used (their secret_type names the finding). Keyword and
public-IP detectors are left out: ordinary test text ("password field") trips them."""
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{24,}")
_HEX = frozenset("0123456789abcdefABCDEF")
_OBSERVED = re.compile(r"\bobserved: (.*?)(?:, [a-z_]+: |\}$)")


@dataclass(frozen=True)
class Finding:
    """One possible secret: where, what kind, and the value (never shown whole)."""

    path: str
    line: int
    kind: str
    value: str

    def problem(self) -> Problem:
        return Problem(self.path, self.line, f"possible {self.kind}: {mask(self.value)}")


def fingerprint(value: str) -> str:
    """The allow-list form of a value: ``sha256:`` and 12 hex digits of its SHA-256."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:12]


def mask(value: str) -> str:
    """The first four characters (fewer for a short value), ``…``, the fingerprint."""
    shown = value[:4] if len(value) >= 12 else value[:1]
    return f"{shown}… ({fingerprint(value)})"


def allow_list(config: Config) -> frozenset[str]:
    """``[secrets] allow`` from ``memidex.toml`` (checked by the config loader): literal
    values and fingerprints."""
    return frozenset(config.secrets.get("allow", ()))


@lru_cache(maxsize=1)
def _detectors() -> tuple[Any, ...]:
    import importlib

    out = []
    for module, name in _PLUGINS:
        try:
            cls = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        except (ImportError, AttributeError):  # a detector renamed in a later release
            continue
        out.append(cls())
    return tuple(out)


@lru_cache(maxsize=1)
def _entropy() -> tuple[Any, Any]:
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString,
        HexHighEntropyString,
    )

    return Base64HighEntropyString(), HexHighEntropyString()


def _line_of(text: str, value: str, start: int = 0) -> int:
    at = text.find(value, start)
    return 1 + text.count("\n", 0, max(at, 0))


_TOKEN_CHARS = r"[A-Za-z0-9_\-+/=.]*"


def _whole(text: str, value: str) -> list[str]:
    """The whole tokens around each occurrence of ``value``: some detectors answer only
    a part of what they matched (GitHub's answers ``ghp`` for ``ghp_…``), and a part is
    neither what must be masked nor a fingerprint worth allowing."""
    found = re.findall(_TOKEN_CHARS + re.escape(value) + _TOKEN_CHARS, text)
    out = sorted({w.strip(".") for w in found if w.strip(".")}, key=len, reverse=True)
    return out or [value]


def scan_text(path: str, text: str, secrets: Sequence[tuple[str, str]] = (),
              allow: Iterable[str] = ()) -> list[Finding]:
    """Every possible secret in one record file's text (see the module docstring)."""
    allowed = set(allow)
    found: dict[tuple[int, str], Finding] = {}

    def add(kind: str, value: str, line: int) -> None:
        if value in allowed or fingerprint(value) in allowed:
            return
        found.setdefault((line, value), Finding(path, line, kind, value))

    for name, value in secrets:
        start = text.find(value) if value else -1
        while start >= 0:
            add(f"secret `{name}` from the secrets file", value, _line_of(text, value, start))
            start = text.find(value, start + len(value))
    for detector in _detectors():
        for value in detector.analyze_string(text):
            if isinstance(value, str) and value:
                for whole in _whole(text, value):
                    add(detector.secret_type, whole, _line_of(text, whole))
    b64, hexa = _entropy()
    for n, line in enumerate(text.splitlines(), start=1):
        if "observed: " not in line:
            continue
        for m in _OBSERVED.finditer(line):
            for token in _TOKEN.findall(m.group(1)):
                is_hex = set(token) <= _HEX
                plugin = hexa if is_hex else b64
                if plugin.calculate_shannon_entropy(token) > plugin.entropy_limit:
                    add(f"high-entropy string ({'hex' if is_hex else 'base64'}) in observed "
                        "text", token, n)
    return sorted(found.values(), key=lambda f: (f.line, f.kind, f.value))


def scan_records(files: Iterable[tuple[str, bytes]], secrets: Sequence[tuple[str, str]] = (),
                 allow: Iterable[str] = ()) -> list[Finding]:
    """:func:`scan_text` over (path, bytes) pairs."""
    allowed = frozenset(allow)
    out: list[Finding] = []
    for path, data in files:
        out += scan_text(path, data.decode("utf-8", "replace"), secrets, allowed)
    return out


def secret_problems(store: Any, config: Any) -> list[Problem]:
    """The scan of every record file of ``store`` (a :class:`memidex.store.files.Store`)
    as check problems, with the secrets file and allow-list of ``config``."""
    from memidex.masking import Masker, secrets_path

    masker = Masker.load(secrets_path(config))
    files, _ = store.scan_records()

    def read() -> Iterable[tuple[str, bytes]]:
        for fs in files:
            try:
                yield fs.relpath, store.read_bytes(fs.relpath)
            except OSError:
                continue  # check reports unreadable files itself

    findings = scan_records(read(), masker.secrets, allow_list(config))
    return [f.problem() for f in findings]
