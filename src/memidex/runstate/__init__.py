"""Local run state under the state folder (``.agent-qa/``, ignored by git): frozen runs
and their results, each test's state, the run counters, proposals and the served log —
each file with one owner and a typed load and save."""
