"""A run made ready for learning (:func:`memidex.app.runprep.prepare_run`) masks every
string and refuses one that is not text in the same walk over the run: a lone surrogate
in a value or a key, masked or not, is the one clear error it was."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memidex.app.runprep import prepare_run
from memidex.errors import InvalidInputError
from memidex.masking import Masker

RUN: dict[str, Any] = {
    "run_id": "r-1", "product": "shop",
    "tests": [{"test_id": "t-1", "verdict": "pass", "steps": [
        {"index": 0, "action": "goto", "target": "page:/home/tester/cart",
         "anchors": ["page:/home/tester/cart"], "observed": "open sesame 42"}]}],
}


def _run() -> dict[str, Any]:
    return copy.deepcopy(RUN)


def test_every_string_is_masked_and_the_input_left_alone(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("HOME", "/home/tester")
    data = _run()
    run = prepare_run(data, source="r.json", masker=Masker((("door", "open sesame 42"),)))
    step = run.tests[0].steps[0]
    assert step.target == "page:~/cart" and step.anchors == ("page:~/cart",)
    assert step.observed == "[secret:door]"
    assert data == RUN  # the caller's data is not changed


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("where", ["value", "key"])
def test_a_lone_surrogate_is_refused_masked_or_not(masked: bool, where: str) -> None:
    data = _run()
    step = data["tests"][0]["steps"][0]
    if where == "value":
        step["observed"] = "Place order \ud800"
    else:
        step["odd \ud800"] = "x"
    with pytest.raises(InvalidInputError) as exc:
        prepare_run(data, source="r.json", masker=Masker(), masked=masked)
    assert "surrogate" in str(exc.value)
