"""The rules of :mod:`service.store.rules` against the scripts that apply them, on a real
redis-server: a failed refit's back-off and the campaign's failure (``after_failure.lua``,
through ``fail_refit.lua``), an import (``import_observations.lua``), the counts by phase
(``count_phases.lua``), the owner's retry (``retry.lua``), tickets expired and pruned
(``expire.lua``), an Idempotency-Key's ticket (``claim.lua``) and a model call admitted
(``admit_short.lua``), each on random states; and the label, run and refit rules, replayed: the
real store (Redis and its Lua scripts) agrees with the pure loop model on every outcome, random
operations (``/next``, labels, failed, abandoned and renewed runs, the clock, a refit's start and
end) replayed against both."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fbgp_al.service import loop
from fbgp_al.service.keys import PHASES, SHORTS
from fbgp_al.service.keys import campaign as campaign_key
from fbgp_al.service.loop import ImportOutcome
from fbgp_al.service.offers import offer
from fbgp_al.service.routes import bodies
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.service.settings import Settings
from fbgp_al.service.store import CampaignStore, rules, scripts
from fbgp_al.service.store.labels import _held_import
from fbgp_al.worker.vocabulary.pools import grid_point
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
    state, labels, history = (campaign_key("c", p) for p in ("state", "labels", "history"))
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
    state = campaign_key("c", "state")
    store.r.delete(state)
    store.r.hset(state, mapping={"refit": "running", "refit_job": "other", "refit_failures": 0})
    keys = [state, campaign_key("c", "labels"), PHASES, campaign_key("c", "history")]
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
            self.tickets.append(answer.ticket)
        return answer

    def label(self, ticket: int | None, y: float):
        known = ticket is not None and ticket < len(self.tickets)
        name = self.tickets[ticket] if known else "never-issued"
        return self.store.labels.record(self.id, name, y, self.now)

    def _name(self, ticket: int | None) -> str:
        known = ticket is not None and ticket < len(self.tickets)
        return self.tickets[ticket] if known else "never-issued"

    def fail(self, ticket: int | None, reason: str):
        return self.store.runs.fail(self.id, self._name(ticket), reason, self.now)

    def abandon(self, ticket: int | None):
        return self.store.runs.abandon(self.id, self._name(ticket), self.now)

    def renew(self, ticket: int | None):
        return self.store.runs.renew(self.id, self._name(ticket), self.now)

    def start_refit(self) -> bool:
        state = self.store.campaigns.state(self.id)
        if state.get("refit") != "queued":
            return False
        self.token = state["refit_job"]
        assert self.store.refits.beat(self.id, self.token, self.now, start=True)
        self.seen = self.store.campaigns.n_labeled(self.id)
        return True

    def finish_refit(self, ranking: tuple[int, ...]) -> bool | None:
        if self.store.campaigns.state(self.id).get("refit") != "running":
            return None
        model = {"version": self.seen, "diagnostics": {"refit_seconds": 1.0}}
        points = [{"index": i, "x": grid_point(self.spec, i), "score": 0.0} for i in ranking]
        assert self.store.models.save(self.id, model, points, self.token)
        again = self.store.refits.end(self.id, self.seen, self.now, self.token)
        if again:
            self.store.refits.enqueue(self.id)
        return again


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rules_strategy(POOL), operations(POOL, length=30))
@example(*LATE_LABEL)
def test_the_store_agrees_with_the_pure_model(bare_store, campaign, ops):
    store = bare_store
    spec = store.campaigns.create(CampaignCreate(**body(campaign, POOL, LEASE)).model_dump())
    model = LoopModel(loop.Rules.of(spec), lease_seconds=LEASE)
    real = Replay(store, spec)
    for op in ops:
        match op:
            case ("next",):
                expected, got = model.next(), real.next()
                if isinstance(expected, loop.Offer):
                    assert isinstance(got, loop.Ticket), (op, expected, got)
                    assert got.x == grid_point(spec, expected.index)
                    assert got.model_version == expected.version
                    assert got.expires_at == real.now + LEASE
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
        snap = store.tickets.snapshot(spec["id"], real.now)
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
    stored = [(label["ticket"], label["y"]) for label in store.labels.all(spec["id"])]
    assert stored == [(real.tickets[t], y) for t, _, y in model.labels]
    failed = [(f["ticket"], f["index"], f["reason"]) for f in store.runs.failures(spec["id"])]
    assert failed == [(real.tickets[t], i, r) for t, i, r in model.failures]
    store.campaigns.delete(spec["id"])


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


# Each rule below on random states: the state written to Redis, the script run on it, and what
# it answers and leaves compared with its Python statement's.
RANDOM = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
C = "c"


def _rules(max_labels: int, design_size: int, allow_repeats: bool = False, max_failures=None):
    return loop.Rules(
        max_labels=max_labels,
        design_index=tuple(range(design_size)),
        mode="sequential",
        max_pending=1,
        allow_repeats=allow_repeats,
        max_failures=max_failures,
    )


def _hash(store, key: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in store.r.hgetall(key).items()}


def _zset(store, key: str) -> dict[str, float]:
    return {m.decode(): s for m, s in store.r.zrange(key, 0, -1, withscores=True)}


PHASE_COUNT = 5  # each phase's count before a script moves a campaign between them


def _phases(store, exists: bool) -> None:
    if exists:
        store.r.hset(
            PHASES, mapping={p: PHASE_COUNT for p in ("design", "active", "done", "failed")}
        )


def _moved(store) -> dict[str, int]:
    return {
        p: int(c) - PHASE_COUNT for p, c in _hash(store, PHASES).items() if int(c) != PHASE_COUNT
    }


refit_phases = st.sampled_from(["idle", "queued", "running"])


@RANDOM
@given(
    max_labels=st.integers(1, 8),
    design_size=st.integers(0, 5),
    allow_repeats=st.booleans(),
    n=st.integers(0, 8),
    labeled=st.frozensets(st.integers(0, 5), max_size=4),
    indices=st.lists(st.none() | st.integers(0, 5), max_size=4),
    held=st.none() | st.sampled_from(["same 3 1", "other 3 1"]),
    keyed=st.booleans(),
    refit=refit_phases,
    failed=st.booleans(),
    stopped=st.booleans(),
    phases=st.booleans(),
)
def test_an_import_is_stored_as_the_rule_says(
    bare_store,
    max_labels,
    design_size,
    allow_repeats,
    n,
    labeled,
    indices,
    held,
    keyed,
    refit,
    failed,
    stopped,
    phases,
):
    store = bare_store
    store.r.flushdb()
    law = _rules(max_labels, design_size, allow_repeats)
    labels, labeled_key, state, spec, imports = (
        campaign_key(C, p) for p in ("labels", "labeled", "state", "spec", "imports")
    )
    store.r.set(spec, "{}")
    if n:
        store.r.rpush(labels, *[json.dumps({"old": i}) for i in range(n)])
    if labeled:
        store.r.sadd(labeled_key, *labeled)
    store.r.hset(
        state,
        mapping={
            "refit": refit,
            "failed": "why" if failed else "",
            "stopped": "1" if stopped else "",
        },
    )
    key = "key" if keyed or held is not None else ""
    if held is not None:
        store.r.hset(imports, key, held)
    _phases(store, phases)
    records = [json.dumps({"y": i, "index": index}) for i, index in enumerate(indices)]
    args: list = [len(indices), max_labels, design_size]
    for record, index in zip(records, indices, strict=True):
        args += [record, "" if index is None else str(index)]
    args += [NOW, "1" if allow_repeats else "0", key, "same"]
    keys = [labels, labeled_key, state, PHASES, spec, imports]
    before = _hash(store, state)
    outcome, n_after, due, *record = store.s.import_observations(keys=keys, args=args)

    expected = rules.import_outcome(law, n, indices, labeled, held, "same")
    if outcome == b"held":
        assert _held_import(record[0], "same")[0] == expected
    else:
        assert ImportOutcome(outcome.decode()) == expected
    stored = [json.loads(v) for v in store.r.lrange(labels, 0, -1)]
    points = {int(i) for i in store.r.smembers(labeled_key)}
    if expected != ImportOutcome.STORED:
        assert stored == [{"old": i} for i in range(n)] and points == labeled
        assert _hash(store, state) == before and due == 0
        assert _moved(store) == {}
        return
    count = len(indices)
    assert n_after == n + count and len(stored) == n + count
    assert stored[n:] == [json.loads(r) for r in records]
    assert points == labeled | {i for i in indices if i is not None}
    moves = rules.phase_moves(law, n, n + count, failed, stopped) if phases else {}
    assert _moved(store) == moves
    assert bool(due) == rules.refit_due(law, n + count, loop.RefitPhase(refit), failed)
    assert store.r.hget(state, "refit").decode() == ("queued" if due else refit)
    if key:
        assert store.r.hget(imports, key).decode() == f"same {n + count} {count}"


# count_phases.lua is a fragment (functions only): a script of its own calls them
PHASE_PROBE = scripts.source("count_phases") + (
    "move_phase(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], KEYS[2])\n"
    "return {phase(tonumber(ARGV[1]), ARGV[3], ARGV[4], has_failed(KEYS[2]), is_stopped(KEYS[2])),"
    " phase(tonumber(ARGV[2]), ARGV[3], ARGV[4], has_failed(KEYS[2]), is_stopped(KEYS[2]))}"
)


@RANDOM
@given(
    max_labels=st.integers(1, 8),
    design_size=st.integers(0, 6),
    before=st.integers(0, 9),
    added=st.integers(0, 4),
    failed=st.booleans(),
    stopped=st.booleans(),
    phases=st.booleans(),
)
def test_labels_move_the_counts_by_phase_as_the_rule_says(
    bare_store, max_labels, design_size, before, added, failed, stopped, phases
):
    store = bare_store
    store.r.flushdb()
    law = _rules(max_labels, design_size)
    state = campaign_key(C, "state")
    store.r.hset(
        state, mapping={"failed": "why" if failed else "", "stopped": "1" if stopped else ""}
    )
    _phases(store, phases)
    probe = store.r.register_script(PHASE_PROBE)
    start, end = probe(keys=[PHASES, state], args=[before, before + added, design_size, max_labels])
    assert start.decode() == loop.phase(law, before, failed, stopped)
    assert end.decode() == loop.phase(law, before + added, failed, stopped)
    if phases:
        assert _moved(store) == rules.phase_moves(law, before, before + added, failed, stopped)
    else:  # absent, the counts are not made up from a part of them
        assert not store.r.exists(PHASES)


@RANDOM
@given(
    max_labels=st.integers(1, 8),
    design_size=st.integers(0, 5),
    max_failures=st.none() | st.integers(0, 4),
    n=st.integers(0, 9),
    refit=refit_phases,
    failed=st.booleans(),
    stopped=st.booleans(),
    n_failed=st.none() | st.integers(0, 9),
    n_forgiven=st.none() | st.integers(0, 9),
    kept=st.integers(0, 5),
    stalled=st.booleans(),
    forget=st.booleans(),
    phases=st.booleans(),
)
def test_the_owners_retry_clears_what_the_rule_says(
    bare_store,
    max_labels,
    design_size,
    max_failures,
    n,
    refit,
    failed,
    stopped,
    n_failed,
    n_forgiven,
    kept,
    stalled,
    forget,
    phases,
):
    store = bare_store
    store.r.flushdb()
    law = _rules(max_labels, design_size, max_failures=max_failures)
    state, labels, failed_points, failures = (
        campaign_key(C, p) for p in ("state", "labels", "failed", "failures")
    )
    fields = {
        "refit": refit,
        "refit_job": "old",
        "failed": "why" if failed else "",
        "stopped": "1" if stopped else "",
        "changes": 3,
        "refit_failures": 2,
        "retry_at": NOW + 9,
    }
    if n_failed is not None:  # else stored before the count: its list counts
        fields["n_failed"] = n_failed
    if n_forgiven is not None:
        fields["n_forgiven"] = n_forgiven
    store.r.hset(state, mapping=fields)
    if n:
        store.r.rpush(labels, *["{}"] * n)
    if kept:
        store.r.rpush(failures, *["{}"] * kept)
    store.r.hset(failed_points, mapping={"1": 2, "4": 1})
    _phases(store, phases)
    before = _hash(store, state)
    snapshot = {**before, "n_failed": before.get("n_failed", str(kept))}
    expected = rules.retry_outcome(law, loop.Refit.of(snapshot), n, stalled, forget)
    args = [
        "job",
        NOW,
        design_size,
        max_labels,
        law.failure_limit,
        "1" if stalled else "0",
        "1" if forget else "0",
    ]
    answer = store.s.retry(keys=[state, labels, PHASES, failed_points, failures], args=args)

    assert answer == (2 if expected.refit else int(expected.cleared))
    after = _hash(store, state)
    if not expected.cleared:
        assert after == before and _moved(store) == {}
        assert store.r.hlen(failed_points) == 2
        return
    counted = int(snapshot["n_failed"])
    if expected.forgiven:
        assert not store.r.exists(failed_points)
        assert (int(after["n_failed"]), int(after["n_forgiven"])) == (counted, counted)
        assert int(after["changes"]) == 4
    else:
        assert store.r.hlen(failed_points) == 2 and int(after["changes"]) == 3
    assert ("failures_forgotten_at" in after) == expected.forgotten
    if expected.refit:
        assert after["refit"] == "queued" and after["refit_job"] == "job"
    else:
        assert after["refit"] == refit and after["refit_job"] == "old"
    if failed:
        assert after["failed"] == "" and after["refit_failures"] == "0"
        assert after["retry_at"] == "0"
    assert _moved(store) == (expected.phases if phases else {})


TICKETS = [f"t{i}" for i in range(8)]
ticket_states = st.sampled_from(["pending", "labeled:1.0", "failed:x", "abandoned", "superseded"])
times = st.integers(0, 12).map(float)


@RANDOM
@given(
    leases=st.dictionaries(st.sampled_from(TICKETS), times, max_size=6),
    expired=st.dictionaries(st.sampled_from(TICKETS), times, max_size=6),
    states=st.dictionaries(st.sampled_from(TICKETS), ticket_states, max_size=8),
    now=times,
    before=times,
    batch=st.integers(1, 4),
    keep=st.integers(0, 5),
)
def test_tickets_expire_and_are_pruned_as_the_rule_says(
    bare_store, leases, expired, states, now, before, batch, keep
):
    store = bare_store
    store.r.flushdb()
    keys = [campaign_key(C, p) for p in ("leases", "expired", "tickets", "ticket_state")]
    if leases:
        store.r.zadd(keys[0], leases)
    if expired:
        store.r.zadd(keys[1], expired)
    store.r.hset(keys[2], mapping={t: "{}" for t in TICKETS})
    if states:
        store.r.hset(keys[3], mapping=states)
    n = store.s.expire(keys=keys, args=[now, before, batch, keep])

    expected = rules.expire_tickets(leases, expired, states, now, before, batch, keep)
    assert n == expected.n
    assert _zset(store, keys[0]) == expected.leases
    assert _zset(store, keys[1]) == expected.expired
    assert set(_hash(store, keys[2])) == set(TICKETS) - expected.dropped
    assert _hash(store, keys[3]) == {t: s for t, s in states.items() if t not in expected.dropped}


@st.composite
def requests(draw) -> dict[str, str]:
    """An Idempotency-Key's ticket for each of up to 90 keys (past 64, the script prunes)."""
    n = draw(st.integers(0, 90))
    tickets = draw(st.lists(st.sampled_from(TICKETS), min_size=n, max_size=n))
    return {f"k{i}": t for i, t in enumerate(tickets)}


# the hash at its bound (65 keys before, one more for the ticket just issued, whose lease is the
# one out) and one past it, half of them for tickets no longer out; and a lease ending now
AT_BOUND = {f"k{i}": "t0" if i % 2 else "t1" for i in range(65)}


@RANDOM
@given(
    held=requests(),
    states=st.dictionaries(st.sampled_from(TICKETS), ticket_states, max_size=8),
    leases=st.dictionaries(st.sampled_from(TICKETS), st.integers(0, 3).map(float), max_size=8),
    now=st.integers(0, 3).map(float),
    key=st.integers(0, 95).map(lambda i: f"k{i}"),
    ticket=st.sampled_from(TICKETS + ["new"]),
)
@example(AT_BOUND, {"t0": "pending", "t1": "abandoned"}, {}, 2.0, "k65", "new")
@example({**AT_BOUND, "k65": "t1"}, {"t0": "pending", "t1": "abandoned"}, {}, 2.0, "k66", "new")
@example({"k1": "t0"}, {"t0": "pending"}, {"t0": 2.0}, 2.0, "k1", "new")
def test_an_idempotency_key_answers_the_ticket_the_rule_says(
    bare_store, held, states, leases, now, key, ticket
):
    store = bare_store
    store.r.flushdb()
    if ticket == "new":  # as /next claims it: just issued
        states, leases = {**states, "new": "pending"}, {**leases, "new": now + 5}
    keys = [campaign_key(C, p) for p in ("requests", "ticket_state", "leases", "tickets", "spec")]
    store.r.set(keys[4], "{}")
    if held:
        store.r.hset(keys[0], mapping=held)
    if states:
        store.r.hset(keys[1], mapping=states)
    if leases:
        store.r.zadd(keys[2], leases)
    store.r.hset(keys[3], mapping={t: "{}" for t in TICKETS + ["new"]})
    found = store.s.claim(keys=keys[:4] + [keys[4]], args=[key, ticket, now])

    winner, after = rules.claim_key(held, states, leases, now, key, ticket)
    assert found[0].decode() == winner
    assert _hash(store, keys[0]) == after


jobs = st.dictionaries(
    st.sampled_from(["refit:a", "refit:b", "short:a", "short:b", "short:c", "short:d"]),
    times,
    max_size=6,
)


@RANDOM
@given(
    campaign_jobs=jobs,
    stack=st.dictionaries(st.sampled_from([f"short:{i}" for i in range(6)]), times, max_size=6),
    now=times,
    most=st.integers(0, 4),
    most_of_stack=st.none() | st.integers(0, 6),
)
def test_a_model_call_is_admitted_as_the_rule_says(
    bare_store, campaign_jobs, stack, now, most, most_of_stack
):
    store = bare_store
    store.r.flushdb()
    keys = [campaign_key(C, "spec"), campaign_key(C, "jobs"), SHORTS]
    store.r.set(keys[0], "{}")
    if campaign_jobs:
        store.r.zadd(keys[1], campaign_jobs)
    if stack:
        store.r.zadd(keys[2], stack)
    share = "" if most_of_stack is None else most_of_stack
    got = store.s.admit_short(keys=keys, args=[now, now + 30, "short:new", most, share])

    expected = rules.admit_short(
        campaign_jobs, stack, now, now + 30, "short:new", most, most_of_stack
    )
    assert (got, _zset(store, keys[1]), _zset(store, keys[2])) == expected
