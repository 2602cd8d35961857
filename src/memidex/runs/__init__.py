"""Runs: the evidence of a test run, read and validated (``memidex.runs.evidence``).

Analysis, candidates, the curator and the gate build on it (docs/runs.md).
"""
