"""Git-native review of knowledge: what a branch changes (:mod:`memidex.review.changes`,
``memidex knowledge review``) and the secret scan of committed records
(:mod:`memidex.review.secrets`, ``knowledge check`` and ``knowledge review``).

Between the typed outcomes (``results``) and the facade (``app``): it reads records and
the store, and is called by the facade and the CLI.
"""
