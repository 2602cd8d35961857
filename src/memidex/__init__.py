"""memidex: a git-native knowledge store for AI testing agents.

The library API is :class:`memidex.app.Memidex`; the CLI is a thin layer over it.
Imports here stay light so that ``memidex --help`` starts fast.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
