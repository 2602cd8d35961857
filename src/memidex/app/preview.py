"""``runs ingest --dry-run``: what a run would teach, planned the way the ingest plans it
and written nowhere (docs/learning.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memidex.config import Config
from memidex.store.files import Store

if TYPE_CHECKING:
    from memidex.app.reading import Reading
    from memidex.app.results import IngestPreview
    from memidex.evidence import Run
    from memidex.masking import Masker

__all__ = ["preview"]


def preview(run: Run, *, config: Config, store: Store, reading: Reading,
            masker: Masker) -> IngestPreview:
    """The run (read, masked and validated as the ingest reads it) analysed and planned
    (:func:`memidex.learning.plan.plan_run`, pure) against the records as they are, at
    the ordinal it would get. Nothing is written: no lease, no frozen run, no counters,
    no model call (the rules' analysis only)."""
    from memidex.app.ingest import StoreSource, already, digest_of
    from memidex.app.results import IngestPreview
    from memidex.learning.plan import analyse, plan_run
    from memidex.runstate.ordinals import Counters
    from memidex.runstate.store import RunStore
    from memidex.runstate.tests import TestsFile

    runs = RunStore(config)
    early = already(runs, run, digest_of(run))
    if early is not None:
        return IngestPreview(run.run_id, run.product, early.ordinal, run.build_tag, run.ci,
                             (), (), early.analysis, already=True)
    frozen = runs.get(run.run_id)
    tests = TestsFile(config, run.product).load().tests
    if frozen is not None:  # frozen by an ingest that did not finish
        n, causes = frozen.ordinal, dict(frozen.analysis)
    else:
        floor = reading.ordinal_floor(run.product)
        _c, n = Counters.load(config).reserve(run.product, run.run_id, floor=floor,
                                              build_tag=run.build_tag)
        causes = analyse(run, tests, model=config.model)
    plan = plan_run(run, n, causes, tests, StoreSource(store), config.learning,
                    mask=masker.mask_record, mask_text=masker.mask)
    changes = tuple((d.op, d.id, d.record.title if d.record is not None else
                     (d.before.title if d.before is not None else ""))
                    for d in plan.decisions if d.op not in ("contradict", "noop"))
    proposals = tuple((p.id, p.op, p.record_id, p.reason) for p in plan.proposals)
    return IngestPreview(run.run_id, run.product, n, run.build_tag, run.ci, changes,
                         proposals, causes, notes=tuple(plan.notes))
