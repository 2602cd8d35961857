"""Run evidence: the JSON a test run hands to ``memidex runs ingest`` (SPEC §3).

Its format (:mod:`.schema`), values (:mod:`.values`), validation (:mod:`.validate`) and
loading (:mod:`.load`). :func:`load_run` reads a file under a size cap, validates it with
``jsonschema`` (imported only when validating) plus the checks a pattern cannot make, and
returns frozen values; every violation is reported, each with its JSON path, in one
:class:`RunEvidenceError`.
"""

from memidex.evidence.load import (
    build_run,
    check_regular_file,
    decode_run,
    load_run,
    parse_run,
    read_run_bytes,
)
from memidex.evidence.schema import (
    ATTEMPT_STATUSES,
    BUILD_TAG_PATTERN,
    HINTS,
    MAX_ATTEMPTS,
    MAX_RUN_BYTES,
    RUN_ID_PATTERN,
    TEST_ID_PATTERN,
    VERDICTS,
    run_schema,
    schema_text,
)
from memidex.evidence.validate import RunEvidenceError, Violation, artifact_problem, validate_run
from memidex.evidence.values import Attempt, Check, Failure, Run, Step, TestResult

__all__ = [
    "ATTEMPT_STATUSES", "BUILD_TAG_PATTERN", "HINTS", "MAX_ATTEMPTS", "MAX_RUN_BYTES",
    "RUN_ID_PATTERN", "TEST_ID_PATTERN", "VERDICTS", "Attempt", "Check", "Failure", "Run",
    "RunEvidenceError", "Step", "TestResult", "Violation", "artifact_problem", "build_run",
    "check_regular_file", "decode_run", "load_run", "parse_run", "read_run_bytes",
    "run_schema", "schema_text", "validate_run",
]
