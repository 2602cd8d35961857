"""The errors of the vectors package: :class:`memidex.errors.MemidexError` subclasses, so
the CLI maps them like every other error (one ``error:`` line, its exit code)."""

from __future__ import annotations

from memidex.errors import InvalidInputError, ProblemsFound, UnsafePathError, UsageError

__all__ = ["ModelCacheError", "ModelUnavailable", "ModelVerifyFailed", "UnsafeModelPath"]


class ModelCacheError(InvalidInputError):
    """A model folder that cannot be imported or read: files missing, a bad manifest, a
    model the runtime refuses (exit 4)."""

    default_hint = "see docs/vectors.md, \"The model cache\""


class ModelUnavailable(UsageError):
    """A model or runtime that is not there (exit 2). Its message is the *reason* a
    level reports (``doctor`` prints it); search falls to the next level instead."""

    default_hint = "see docs/vectors.md, \"Search levels\""


class UnsafeModelPath(UnsafePathError):
    """A model name or file that would leave the model cache, or a symlink inside it."""

    default_hint = "model names are plain folder names inside the model cache; no links"


class ModelVerifyFailed(ProblemsFound):
    """``models verify`` found a file whose checksum differs from its manifest (exit 1)."""
