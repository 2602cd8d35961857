"""The version, in a module of its own so any layer can read it without the package root."""

__version__ = "0.1.0"
