"""The rules of :mod:`service.store.rules` against the scripts that apply them, on a real
redis-server: a failed refit's back-off and the campaign's failure (``after_failure.lua``, through
``fail_refit.lua``), on random states. The label, run and refit rules are replayed against their
scripts in ``tests/service/test_loop_store.py``."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.keys import PHASES
from service.store import rules

NOW = 1_000_000.0


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(before=st.integers(0, 6), attempts=st.integers(1, 6), died=st.booleans(),
       base=st.floats(0.5, 30.0), cap=st.floats(1.0, 600.0),
       running=st.booleans())  # fmt: skip
def test_a_failed_refit_backs_off_as_the_rule_says(bare_store, before, attempts, died, base, cap,
                                                    running):  # fmt: skip
    store = bare_store
    state, labels, history = (store.k("c", p) for p in ("state", "labels", "history"))
    store.r.delete(state, labels, history, PHASES)
    store.r.hset(state, mapping={"refit": "running" if running else "queued", "refit_job": "old",
                                 "refit_failures": before, "started_at": NOW - 5,
                                 "heartbeat": NOW - 1})  # fmt: skip
    store.r.rpush(labels, *["{}"] * 4)
    p = {"job": "new", "now": NOW, "attempts": attempts, "base": base, "cap": cap, "died": died,
         "reason": "why", "design_size": 3, "max_labels": 10, "keep": 100}  # fmt: skip
    outcome = store.s.fail_refit(keys=[state, labels, PHASES, history],
                                 args=["old", "error", "{}", json.dumps(p)])  # fmt: skip
    after = {k.decode(): v.decode() for k, v in store.r.hgetall(state).items()}
    failures = before + 1
    assert int(after["refit_failures"]) == failures
    if failures >= attempts:  # the campaign failed
        assert outcome == 3 and after["failed"] == "why" and after["refit"] == "idle"
        assert json.loads(store.r.lindex(history, -1))["event"] == "failed"
        return
    delay = rules.backoff(failures, base, cap, died)
    if delay > 0:  # idle until its back-off ends
        assert outcome == 2 and after["refit"] == "idle" and after["refit_job"] == ""
        assert float(after["retry_at"]) == pytest.approx(NOW + delay, abs=1e-5)
    else:  # queued again at once under the new job
        assert outcome == 1 and after["refit"] == "queued" and after["refit_job"] == "new"
    if running:  # how long the failed one ran: until now, or for one that died its heartbeat
        assert float(after["failed_refit_seconds"]) == pytest.approx(4.0 if died else 5.0)


def test_a_refit_not_in_charge_changes_nothing(bare_store):
    store = bare_store
    state = store.k("c", "state")
    store.r.delete(state)
    store.r.hset(state, mapping={"refit": "running", "refit_job": "other", "refit_failures": 0})
    keys = [state, store.k("c", "labels"), PHASES, store.k("c", "history")]
    assert store.s.fail_refit(keys=keys, args=["old", "error", "{}", "{}"]) == 0
    assert store.r.hget(state, "refit_failures") == b"0"
