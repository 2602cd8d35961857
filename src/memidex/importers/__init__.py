"""Test-runner reports → run evidence (docs/import.md).

:func:`import_report` reads a Playwright JSON report (1.28 onwards), a JUnit XML file
(pytest, Maven Surefire, Playwright's junit reporter) or a CTRF report and returns SPEC §3
run evidence (:mod:`memidex.importers.report`). The names are exported here but imported
on first use: ``runs ingest`` of run evidence needs only the format probe and the size
check (:mod:`memidex.importers.detect`), not the report readers (~35 ms to import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memidex.lazy import exports

if TYPE_CHECKING:
    from memidex.importers.build import ANCHOR_ANNOTATION, VERIFIED_ANNOTATION
    from memidex.importers.common import EmptyReportError, ReportError
    from memidex.importers.detect import FORMATS, MAX_REPORT_BYTES, check_size, probe
    from memidex.importers.report import ImportResult, import_report, report_run_id

__all__ = [
    "ANCHOR_ANNOTATION",
    "FORMATS",
    "MAX_REPORT_BYTES",
    "VERIFIED_ANNOTATION",
    "EmptyReportError",
    "check_size",
    "ImportResult",
    "ReportError",
    "import_report",
    "probe",
    "report_run_id",
]

_HOME = {"ANCHOR_ANNOTATION": "build", "VERIFIED_ANNOTATION": "build",
         "EmptyReportError": "common", "ReportError": "common", "FORMATS": "detect",
         "MAX_REPORT_BYTES": "detect", "check_size": "detect", "probe": "detect",
         "ImportResult": "report", "import_report": "report", "report_run_id": "report"}


__getattr__ = exports(__name__, _HOME, globals())
