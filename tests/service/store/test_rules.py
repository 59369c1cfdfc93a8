"""The rules of :mod:`service.store.rules` against the scripts that apply them, on a real
redis-server: a failed refit's back-off and the campaign's failure (``after_failure.lua``,
through ``fail_refit.lua``), on random states; and the label, run and refit rules, replayed: the
real store (Redis and its Lua scripts) agrees with the pure loop model on every outcome, random
operations (``/next``, labels, failed, abandoned and renewed runs, the clock, a refit's start and
end) replayed against both."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fbgp_al.service import loop
from fbgp_al.service.keys import PHASES
from fbgp_al.service.offers import offer
from fbgp_al.service.routes import bodies
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.service.settings import Settings
from fbgp_al.service.store import CampaignStore, rules
from fbgp_al.worker.spec.pools import grid_point
from tests.service.loop_model import (
    LATE_LABEL,
    START,
    LoopModel,
    body,
    operations,
    resolve,
    rules_strategy,
)

NOW = 1_000_000.0


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.integers(0, 6),
    attempts=st.integers(1, 6),
    died=st.booleans(),
    base=st.floats(0.5, 30.0),
    cap=st.floats(1.0, 600.0),
    running=st.booleans(),
)
def test_a_failed_refit_backs_off_as_the_rule_says(
    bare_store, before, attempts, died, base, cap, running
):
    store = bare_store
    state, labels, history = (store.k("c", p) for p in ("state", "labels", "history"))
    store.r.delete(state, labels, history, PHASES)
    store.r.hset(
        state,
        mapping={
            "refit": "running" if running else "queued",
            "refit_job": "old",
            "refit_failures": before,
            "started_at": NOW - 5,
            "heartbeat": NOW - 1,
        },
    )
    store.r.rpush(labels, *["{}"] * 4)
    p = {
        "job": "new",
        "now": NOW,
        "attempts": attempts,
        "base": base,
        "cap": cap,
        "died": died,
        "reason": "why",
        "design_size": 3,
        "max_labels": 10,
        "keep": 100,
    }
    outcome = store.s.fail_refit(
        keys=[state, labels, PHASES, history], args=["old", "error", "{}", json.dumps(p)]
    )
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


POOL = 8
LEASE = 5.0


class Replay:
    """The same operations on the store, as the routes and the jobs do them."""

    def __init__(self, store: CampaignStore, spec: dict):
        self.store, self.spec, self.id = store, spec, spec["id"]
        # refits never die here (their jobs wait in a queue no worker serves)
        self.settings = Settings(refit_lease_seconds=1e9)
        self.now = START
        self.tickets: list[str] = []
        self.token: str | None = None
        self.seen = 0

    def next(self):
        answer = offer(self.store, self.id, self.now, self.settings)
        if isinstance(answer, list):
            (answer,) = answer
            self.tickets.append(answer["ticket"])
        return answer

    def label(self, ticket: int | None, y: float):
        known = ticket is not None and ticket < len(self.tickets)
        name = self.tickets[ticket] if known else "never-issued"
        return self.store.record_label(self.id, name, y, self.now)

    def _name(self, ticket: int | None) -> str:
        known = ticket is not None and ticket < len(self.tickets)
        return self.tickets[ticket] if known else "never-issued"

    def fail(self, ticket: int | None, reason: str):
        return self.store.fail_run(self.id, self._name(ticket), reason, self.now)

    def abandon(self, ticket: int | None):
        return self.store.abandon(self.id, self._name(ticket), self.now)

    def renew(self, ticket: int | None):
        return self.store.renew(self.id, self._name(ticket), self.now)

    def start_refit(self) -> bool:
        state = self.store.state(self.id)
        if state.get("refit") != "queued":
            return False
        self.token = state["refit_job"]
        assert self.store.beat(self.id, self.token, self.now, start=True)
        self.seen = self.store.n_labeled(self.id)
        return True

    def finish_refit(self, ranking: tuple[int, ...]) -> bool | None:
        if self.store.state(self.id).get("refit") != "running":
            return None
        model = {"version": self.seen, "diagnostics": {"refit_seconds": 1.0}}
        points = [{"index": i, "x": grid_point(self.spec, i), "score": 0.0} for i in ranking]
        assert self.store.save_model(self.id, model, points, self.token)
        again = self.store.end_refit(self.id, self.seen, self.now, self.token)
        if again:
            self.store.enqueue_refit(self.id)
        return again


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rules_strategy(POOL), operations(POOL, length=30))
@example(*LATE_LABEL)
def test_the_store_agrees_with_the_pure_model(bare_store, campaign, ops):
    store = bare_store
    spec = store.create(CampaignCreate(**body(campaign, POOL, LEASE)).model_dump())
    model = LoopModel(loop.Rules.of(spec), lease_seconds=LEASE)
    real = Replay(store, spec)
    for op in ops:
        match op:
            case ("next",):
                expected, got = model.next(), real.next()
                if isinstance(expected, loop.Offer):
                    assert isinstance(got, dict), (op, expected, got)
                    assert got["x"] == grid_point(spec, expected.index)
                    assert got["model_version"] == expected.version
                    assert got["expires_at"] == real.now + LEASE
                else:
                    assert got == expected, op
            case ("label", ref, y):
                ticket = resolve(ref, len(model.tickets))
                assert real.label(ticket, y) == model.label(ticket, y), op
            case ("tick", seconds):
                model.tick(seconds)
                real.now += seconds
            case ("start",):
                assert real.start_refit() == model.start_refit(), op
            case ("finish", ranking):
                assert real.finish_refit(ranking) == model.finish_refit(ranking), op
            case ("fail", ref, reason):
                ticket = resolve(ref, len(model.tickets))
                assert real.fail(ticket, reason) == model.fail(ticket, reason), op
            case ("abandon", ref):
                ticket = resolve(ref, len(model.tickets))
                assert real.abandon(ticket) == model.abandon(ticket), op
            case ("renew", ref):
                ticket = resolve(ref, len(model.tickets))
                assert real.renew(ticket) == model.renew(ticket), op
        snap = store.snapshot(spec["id"], real.now)
        assert snap == model.snapshot() or _same(snap, model.snapshot()), op
        status = bodies.status(store, spec["id"], real.now)
        failing = loop.failing(model.rules, len(model.failures), status["n_forgiven"])
        stalled = loop.stalled(model.rules, model.snapshot())
        phase = loop.phase(model.rules, len(model.labels))
        assert status["state"] == loop.state(phase, failing, stalled)  # failing, stalled or phase
        assert status["refit"] == model.refit
        assert status["n_failed"] == len(model.failures)
        assert status["n_abandoned"] == model.abandoned
        assert status["stalled"] == loop.stalled(model.rules, model.snapshot())
    stored = [(label["ticket"], label["y"]) for label in store.labels(spec["id"])]
    assert stored == [(real.tickets[t], y) for t, _, y in model.labels]
    failed = [(f["ticket"], f["index"], f["reason"]) for f in store.failures(spec["id"])]
    assert failed == [(real.tickets[t], i, r) for t, i, r in model.failures]
    store.delete(spec["id"])


def _same(real: loop.Snapshot, model: loop.Snapshot) -> bool:
    """The store's refit state has more in it (its job, times): compare what the model has."""
    return (
        real.n_labeled,
        real.n_pending,
        real.pending,
        real.labeled,
        real.ranking,
        real.refit.phase,
        real.refit.model_version,
        real.failures,
        real.refit.changed,
    ) == (
        model.n_labeled,
        model.n_pending,
        model.pending,
        model.labeled,
        model.ranking,
        model.refit.phase,
        model.refit.model_version,
        model.failures,
        model.refit.changed,
    )
