"""Connecting to the team index, and the one map from PostgreSQL's errors to memidex's.

Every psycopg error that leaves this package goes through :func:`translate` (a bad URL
is a ``ConfigError``, refused credentials too; a server that cannot be reached or went
away an ``IndexUnavailableError`` — reading commands fall back to the local index on it;
a push the server refused a ``StorageError``). A password is never printed: messages
name the URL with it masked (:func:`redact`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memidex.config.tables import redact_url
from memidex.errors import ConfigError, IndexUnavailableError, MemidexError, StorageError

if TYPE_CHECKING:
    import psycopg

__all__ = ["DEFAULT_TIMEOUT", "connect", "reachable", "redact", "translate", "translating"]

DEFAULT_TIMEOUT = 5.0
"""Seconds to wait for a connection (``connect_timeout``) before giving up."""

_URL_HINT = "set [index] url or MEMIDEX_INDEX_URL to postgresql://USER:PASSWORD@HOST/DB"


def redact(url: str) -> str:
    """``url`` with its password (if any) shown as ``***`` (the config's one masking)."""
    return redact_url(url)


def _check_url(url: str) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    if not url.strip():
        raise ConfigError("the team index URL is empty", hint=_URL_HINT)
    if "://" in url and not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"the team index URL {redact(url)} is not a PostgreSQL URL",
                          hint=_URL_HINT)
    try:
        return {k: str(v) for k, v in conninfo_to_dict(url).items()}
    except Exception as exc:  # psycopg.ProgrammingError: libpq cannot parse it
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"the team index URL {redact(url)} cannot be read ({redact(reason)})",
                          hint=_URL_HINT) from None


def translate(exc: BaseException, url: str, *, doing: str = "reading") -> MemidexError:
    """The memidex error for a psycopg error met while ``doing`` (reading or pushing)."""
    import psycopg
    from psycopg import errors as pe

    where = redact(url)
    text = redact(str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__)
    if isinstance(exc, MemidexError):
        return exc
    if isinstance(exc, pe.InvalidPassword | pe.InvalidAuthorizationSpecification) or \
            "password authentication failed" in str(exc) or "no password supplied" in str(exc):
        return ConfigError(f"the team index at {where} refused the credentials ({text})",
                           hint="check the user and password in [index] url or "
                           "MEMIDEX_INDEX_URL")
    if isinstance(exc, pe.InvalidCatalogName):
        return ConfigError(f"the team index at {where} has no such database ({text})",
                           hint="create it, or fix the database name in the URL")
    if isinstance(exc, pe.InsufficientPrivilege):
        return StorageError(f"the team index at {where} refused {doing} ({text})",
                            hint="the push needs a role that may create the `memidex` schema "
                            "(and a superuser to run `CREATE EXTENSION vector` once)")
    if isinstance(exc, pe.UndefinedFile | pe.FeatureNotSupported) and "vector" in str(exc):
        return StorageError(f"the team index at {where} has no pgvector ({text})",
                            hint="install pgvector on the server (scripts/install_pg.sh does "
                            "it on Debian)")
    if isinstance(exc, psycopg.OperationalError | pe.AdminShutdown | pe.CrashShutdown |
                  pe.CannotConnectNow):
        if doing == "pushing":
            return StorageError(f"the team index at {where} went away while pushing ({text})",
                                hint="nothing half-done is served: the push is one "
                                "transaction; run it again once the server is back")
        return IndexUnavailableError(f"the team index at {where} cannot be reached ({text})",
                                     hint="check the server and [index] url; reading commands "
                                     "use the local index meanwhile")
    if isinstance(exc, psycopg.Error):
        return StorageError(f"the team index at {where} failed while {doing} ({text})")
    raise exc


@contextmanager
def translating(url: str, doing: str = "reading") -> Iterator[None]:
    """Raise psycopg's errors inside the block as memidex errors (:func:`translate`)."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, url, doing=doing) from None


def connect(url: str, *, timeout: float = DEFAULT_TIMEOUT, doing: str = "reading",
            autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection to ``url``; a bad URL or an unreachable server is a MemidexError."""
    import psycopg

    params = _check_url(url)
    with translating(url, doing):
        conn = psycopg.connect(url, connect_timeout=max(2, round(timeout)),
                               autocommit=autocommit,
                               application_name=params.get("application_name", "memidex"))
        # No server-side prepared statements: after five runs PostgreSQL may switch one to
        # a generic plan, which for a full-text query with a filter is the slow one (a
        # search p95 went from 6 to 50 ms); planning each query costs well under 1 ms.
        conn.prepare_threshold = None
        return conn


def reachable(url: str, timeout: float = 1.0) -> bool:
    """Whether the team index answers within ``timeout`` seconds (for the fallback)."""
    try:
        conn = connect(url, timeout=timeout)
    except MemidexError:
        return False
    try:
        conn.execute("SELECT 1")
        return True
    except Exception:  # psycopg.Error: it answered, then failed
        return False
    finally:
        conn.close()
