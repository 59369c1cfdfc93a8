"""The labeling loop's rules (service/loop.py). Property tests without Redis: a repeated label
(or failure, or abandon) changes nothing, the order of arrival does not change the set stored,
nothing is handed out twice while leased, done is final (a stopped campaign too), never more
points out than the mode allows, a point failed for good is never offered again, and a campaign
that cannot go on says so instead of waiting. And parallel mode over HTTP, against the real
Redis and worker: several points out at once (up to max_pending), never one twice, and several
simulators labeling at once store every label once while refits run one after another."""

from __future__ import annotations

import copy
import itertools
import threading
import time
from dataclasses import replace
from itertools import pairwise

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fbgp_al.clients.simulators import get_simulator
from fbgp_al.service import loop
from fbgp_al.service.loop import LabelOutcome, RefitPhase, RenewOutcome, RunOutcome
from fbgp_al.service.store import rules as store_rules
from tests.service.loop_model import (
    LATE_LABEL,
    REASONS,
    YS,
    LoopModel,
    operations,
    resolve,
    rules_strategy,
)

POOL = 8


def _model(draw_settings: dict, design: list[int]) -> LoopModel:
    rules = loop.Rules(
        max_labels=max(draw_settings["max_labels"], len(design)),
        design_index=tuple(design),
        mode=draw_settings["mode"],
        max_pending=draw_settings["max_pending"],
        allow_repeats=draw_settings["allow_repeats"],
        max_retries=draw_settings.get("max_retries", 0),
        design_reserve=tuple(i for i in reversed(range(POOL)) if i not in design),
    )
    return LoopModel(rules, lease_seconds=5.0)


campaigns = st.tuples(
    rules_strategy(POOL), st.lists(st.integers(0, POOL - 1), min_size=1, max_size=3, unique=True)
).map(lambda t: _model(*t))


def _run(model: LoopModel, ops: list[tuple], check=None) -> None:
    """Apply ``ops``; ``check(model, op, before, result)`` after each."""
    for op in ops:
        before = copy.deepcopy(model)
        match op:
            case ("next",):
                result = model.next()
            case ("label", ref, y):
                result = model.label(resolve(ref, len(model.tickets)), y)
            case ("tick", seconds):
                result = model.tick(seconds)
            case ("start",):
                result = model.start_refit()
            case ("finish", ranking):
                result = model.finish_refit(ranking)
            case ("fail", ref, reason):
                result = model.fail(resolve(ref, len(model.tickets)), reason)
            case ("abandon", ref):
                result = model.abandon(resolve(ref, len(model.tickets)))
            case ("renew", ref):
                result = model.renew(resolve(ref, len(model.tickets)))
        if check:
            check(model, op, before, result)


def _state(model: LoopModel):
    return (
        list(model.labels),
        set(model.labeled),
        [copy.copy(t) for t in model.tickets],
        model.refit,
        model.version,
        list(model.failures),
        dict(model.failed),
        model.abandoned,
    )


@settings(max_examples=300, deadline=None)
@given(campaigns, operations(POOL))
@example(_model(LATE_LABEL[0], [0, 1]), LATE_LABEL[1])
def test_every_offer_keeps_the_loop_s_promises(model, ops):
    """Nothing handed out twice while leased (nor, without repeats, once labeled); never more
    tickets out than max_labels - n; after the design at most max_pending out (parallel) or
    one (sequential, and only from a model that saw every label); done is final."""
    rules = model.rules

    def check(m: LoopModel, op, before: LoopModel, result) -> None:
        live = m.live()
        assert len({t.index for t in live}) == len(live)  # one live ticket per point
        n = len(before.labels)
        if before.snapshot().n_labeled >= rules.max_labels:  # done is final
            assert len(m.labels) == n
            if op[0] == "next":
                assert isinstance(result, loop.Done)
            if op[0] == "label":
                assert result[0] != LabelOutcome.STORED
        if op[0] != "next" or not isinstance(result, loop.Offer):
            return
        out = before.live()
        assert result.index not in {t.index for t in out}
        # a point failed more than max_retries times is never offered again
        assert before.failed.get(result.index, 0) <= rules.max_retries
        if not rules.allow_repeats:
            assert result.index not in before.labeled
        assert n + len(out) < rules.max_labels
        if n >= rules.design_size:
            if rules.mode == "sequential":
                assert not out and result.version == n
            else:
                assert len(out) < rules.max_pending and result.version is not None
        else:
            assert result.index in loop.design_points(rules, before.snapshot())
            assert result.index not in before.labeled  # the design's points are distinct
            assert result.version is None

    _run(model, ops, check)


def test_the_design_labels_distinct_points_where_repeats_are_allowed():
    """One simulator labeling a campaign that allows repeats gets each design point once."""
    rules = loop.Rules(
        max_labels=6,
        design_index=(5, 7, 2),
        mode="sequential",
        max_pending=1,
        allow_repeats=True,
        design_reserve=(0, 1),
    )
    model = LoopModel(rules, lease_seconds=5.0)
    offered = []
    for k in range(3):
        answer = model.next()
        assert isinstance(answer, loop.Offer)
        offered.append(answer.index)
        assert model.label(k, 0.5)[0] == LabelOutcome.STORED
    assert offered == [5, 7, 2]


def test_a_ticket_whose_point_was_labeled_under_another_ends_and_frees_its_place():
    """A lease ran out, the point went out again, the late label was stored: the second
    ticket's label conflicts and ends it, so a sequential campaign goes on at once instead of
    waiting out that ticket's lease; the ended ticket cannot be renewed, failed or abandoned."""
    rules = loop.Rules(
        max_labels=4,
        design_index=(3, 6),
        mode="sequential",
        max_pending=1,
        allow_repeats=False,
        design_reserve=(0,),
    )
    model = LoopModel(rules, lease_seconds=5.0)
    assert model.next() == loop.Offer(3, None)
    model.tick(7.0)  # its lease ran out: the point is offered again
    assert model.next() == loop.Offer(3, None)
    assert model.label(0, 1.0)[0] == LabelOutcome.STORED  # the late label
    assert model.label(1, 2.5)[0] == LabelOutcome.CONFLICT
    assert model.tickets[1].state == loop.SUPERSEDED and not model.live()
    assert model.next() == loop.Offer(6, None)
    assert model.label(1, 2.5)[0] == LabelOutcome.CONFLICT
    assert model.renew(1)[0] == RenewOutcome.ENDED
    assert model.abandon(1)[0] == RunOutcome.CONFLICT
    assert model.fail(1, "boom")[0] == RunOutcome.CONFLICT


@settings(max_examples=200, deadline=None)
@given(campaigns, operations(POOL), st.integers(1, 4))
def test_one_look_for_several_polls_answers_as_that_many_looks(model, ops, count):
    """``next_answers`` (a look that serves ``count`` waiting polls at once) hands out what
    ``count`` calls of ``/next`` in a row would: the same offers in the same order, up to the
    first that is not an offer; that answer itself where there is not even one."""

    def check(m: LoopModel, op, before, result) -> None:
        batch = loop.next_answers(m.rules, m.snapshot(), count)
        one_by_one = copy.deepcopy(m)
        answers = [one_by_one.next() for _ in range(count)]
        offers = list(itertools.takewhile(lambda a: isinstance(a, loop.Offer), answers))
        assert batch == (offers or answers[0])

    _run(model, ops, check)


@settings(max_examples=200, deadline=None)
@given(campaigns, operations(POOL))
def test_a_repeated_label_changes_nothing(model, ops):
    _run(model, ops)
    for k, ticket in enumerate(model.tickets):
        if not ticket.state.startswith("labeled:"):
            continue
        y = next(y for t, _, y in model.labels if t == k)
        before = _state(model)
        outcome, n, enqueue = model.label(k, y)
        assert outcome == LabelOutcome.SAME_AGAIN and n == len(model.labels) and not enqueue
        assert _state(model) == before
        other = next(v for v in YS if v != y)
        assert model.label(k, other)[0] == LabelOutcome.CONFLICT and _state(model) == before


@settings(max_examples=200, deadline=None)
@given(campaigns, operations(POOL))
def test_a_repeated_failure_or_abandon_changes_nothing(model, ops):
    _run(model, ops)
    for k, ticket in enumerate(model.tickets):
        before = _state(model)
        if ticket.state.startswith("failed:"):
            reason = next(r for number, _, r in model.failures if number == k)
            assert model.fail(k, reason) == (RunOutcome.SAME_AGAIN, len(model.failures), False)
            other = next(r for r in REASONS if r != reason)
            assert model.fail(k, other)[0] == RunOutcome.CONFLICT
            assert model.abandon(k)[0] == RunOutcome.CONFLICT
        elif ticket.state == "abandoned":
            assert model.abandon(k) == (RunOutcome.SAME_AGAIN, model.abandoned, False)
            assert model.fail(k, REASONS[0])[0] == RunOutcome.CONFLICT
        else:
            continue
        assert model.label(k, YS[0])[0] == LabelOutcome.CONFLICT
        assert model.renew(k)[0] == RenewOutcome.ENDED
        assert _state(model) == before


@settings(max_examples=300, deadline=None)
@given(campaigns, operations(POOL))
def test_a_campaign_that_cannot_go_on_says_so(model, ops):
    """Whenever nothing is out, no refit is coming and the last refit's ranking is in place,
    ``/next`` offers a point or the campaign is done or stalled; and stalled means that every
    point not labeled has failed for good (or is not in the ranking)."""

    def check(m: LoopModel, op, before, result) -> None:
        snap = m.snapshot()
        answer = loop.next_answer(m.rules, snap)
        if isinstance(answer, loop.Stalled):
            assert snap.failures and snap.n_pending == 0
            gone = loop.failed_for_good(m.rules, snap) | (
                frozenset() if m.rules.allow_repeats else snap.labeled
            )
            if snap.n_labeled < m.rules.design_size:
                assert set(loop.design_points(m.rules, snap)) <= gone
            else:
                assert set(snap.ranking) <= gone and m.refit == RefitPhase.IDLE
        quiet = snap.n_pending == 0 and m.refit == RefitPhase.IDLE and not snap.refit.changed
        design = snap.n_labeled < m.rules.design_size
        if quiet and (design or m.version == snap.n_labeled) and not isinstance(answer, loop.Wait):
            return
        if quiet and design:
            raise AssertionError(f"the design waits with nothing out: {snap}")

    _run(model, ops, check)


def test_a_failed_point_is_offered_again_max_retries_times_then_replaced():
    rules = loop.Rules(
        max_labels=3,
        design_index=(0, 1),
        mode="sequential",
        max_pending=1,
        allow_repeats=False,
        max_retries=1,
        max_failures=6,
        design_reserve=(5, 6),
    )
    model = LoopModel(rules, lease_seconds=5.0)
    assert model.next() == loop.Offer(0, None) and model.next() == loop.Offer(1, None)
    assert model.fail(0, "boom") == (RunOutcome.STORED, 1, False)
    assert model.next() == loop.Offer(0, None)  # one retry allowed
    assert model.fail(2, "boom")[0] == RunOutcome.STORED
    assert model.next() == loop.Offer(5, None)  # failed for good: the reserve stands in
    assert model.abandon(1) == (RunOutcome.STORED, 1, False)
    assert model.next() == loop.Offer(1, None)  # abandoned: offered again at once
    assert model.label(3, 1.0)[0] == LabelOutcome.STORED
    assert model.fail(4, "x")[0] == RunOutcome.STORED
    assert model.next() == loop.Offer(1, None)
    assert model.fail(5, "x")[0] == RunOutcome.STORED  # point 1 failed for good too
    assert model.next() == loop.Offer(6, None)
    assert model.fail(6, "x")[0] == RunOutcome.STORED
    assert model.next() == loop.Offer(6, None)
    assert model.fail(7, "x")[0] == RunOutcome.STORED
    assert isinstance(model.next(), loop.Stalled)  # design and reserve failed for good
    assert loop.failing(rules, 7) and not loop.failing(rules, 6)
    assert not loop.failing(rules, 9, n_forgiven=3)  # forgiven by a retry: they count no more


def test_a_failing_campaign_hands_out_nothing():
    """More failed runs than max_failures (but for those forgiven): no point, whatever else
    could be offered; the labels of tickets out are still taken."""
    rules = loop.Rules(
        max_labels=5,
        design_index=(0, 1, 2),
        mode="sequential",
        max_pending=1,
        allow_repeats=False,
        max_failures=1,
        design_reserve=(7, 8),
    )
    model = LoopModel(rules, lease_seconds=5.0)
    assert [model.next() for _ in range(3)] == [loop.Offer(i, None) for i in range(3)]
    assert model.fail(0, "boom")[0] == RunOutcome.STORED
    assert model.next() == loop.Offer(7, None)  # one failure: not failing yet
    assert model.fail(3, "boom")[0] == RunOutcome.STORED
    assert model.next() == loop.Failing(failed=2, limit=1)
    assert model.label(1, 1.0)[0] == LabelOutcome.STORED  # a ticket out is still labeled
    snap = model.snapshot()
    forgiven = replace(snap, refit=replace(snap.refit, n_forgiven=2))
    assert loop.next_answer(rules, forgiven) == loop.Offer(8, None)


@settings(max_examples=200, deadline=None)
@given(campaigns, st.randoms(use_true_random=False), st.integers(0, 2))
def test_the_order_of_arrival_does_not_change_the_set_stored(model, random, repeats):
    """Tickets out for distinct points, each labeled with its own y (some posted more than
    once, some unknown tickets among them), in two orders: the same labels are stored."""
    while isinstance(answer := model.next(), loop.Offer) or model.start_refit():
        if not isinstance(answer, loop.Offer):
            model.finish_refit(tuple(range(POOL)))
    ys = {k: YS[k % len(YS)] for k in range(len(model.tickets))}
    posts = [(k, ys[k]) for k in ys for _ in range(1 + repeats)] + [(None, 1.0)]
    stored = []
    for _ in range(2):
        replay = copy.deepcopy(model)
        random.shuffle(posts)
        for k, y in posts:
            replay.label(k, y)
        stored.append({(t, y) for t, _, y in replay.labels})
        assert len(replay.labels) == len(stored[-1])  # each ticket once
    assert stored[0] == stored[1]


def test_done_answers_done_and_stores_nothing_more():
    """A ticket re-issued after its lease expired is labeled after the campaign filled up."""
    rules = loop.Rules(
        max_labels=2, design_index=(0, 1), mode="parallel", max_pending=3, allow_repeats=True
    )
    model = LoopModel(rules, lease_seconds=5.0)
    assert [model.next(), model.next()] == [loop.Offer(0, None), loop.Offer(1, None)]
    assert isinstance(model.next(), loop.Wait)  # max_labels tickets are out
    model.tick(6.0)
    assert model.next() == loop.Offer(0, None)  # the first lease expired
    assert model.label(0, 1.0)[0] == LabelOutcome.STORED
    assert model.label(1, 1.0)[0] == LabelOutcome.STORED
    assert model.label(2, 1.0)[0] == LabelOutcome.DONE and len(model.labels) == 2
    assert isinstance(model.next(), loop.Done)
    assert loop.phase(rules, 2) == loop.Phase.DONE


@given(st.integers(0, 10), st.integers(0, 10), st.sampled_from(list(RefitPhase)))
def test_a_refit_is_due_once_the_design_is_labeled_and_none_is_in_charge(n, design, phase):
    rules = loop.Rules(
        max_labels=20,
        design_index=tuple(range(design)),
        mode="sequential",
        max_pending=1,
        allow_repeats=False,
    )
    assert store_rules.refit_due(rules, n, phase) == (n >= design and phase == RefitPhase.IDLE)


def test_a_stopped_campaign_is_done_in_the_loop_s_rules():
    rules = loop.Rules(
        max_labels=10, design_index=(0, 1, 2), mode="parallel", max_pending=3, allow_repeats=False
    )
    verdict = '{"rule": "qbc", "value": 0.1, "target": 0.2, "version": 5, "at": 1.0}'
    stopped = loop.Refit(model_version=5, stopped=verdict)
    snap = loop.Snapshot(
        n_labeled=5,
        n_pending=1,
        pending=frozenset({7}),
        labeled=frozenset(),
        refit=stopped,
        ranking=(3, 4, 5),
    )
    assert loop.next_answer(rules, snap) == loop.Done(verdict)
    assert loop.next_answer(rules, replace(snap, refit=loop.Refit(model_version=5))) == loop.Offer(
        3, 5
    )
    assert loop.phase(rules, 5, stopped=True) == loop.Phase.DONE
    assert loop.phase(rules, 5, failed=True, stopped=True) == loop.Phase.FAILED
    assert loop.Refit.of({"stopped": verdict}).stopped == verdict
    assert loop.Refit.of({"stopped": ""}).stopped is None
    # a ticket of a stopped campaign still takes its label
    assert store_rules.label_outcome(rules, "pending", 0.5, 5, False) == loop.LabelOutcome.STORED


def _next(client, campaign: str, wait: float = 0.0):
    return client.get(f"/campaigns/{campaign}/next", params={"wait": wait})


def _label(client, campaign: str, point: dict, y: float):
    return client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})


def test_four_simulators_label_one_campaign_without_duplicates(client, make_body):
    sim = get_simulator("gramacy2d")
    body = make_body(
        inputs=sim.inputs(),
        pool={"type": "grid", "points_per_dim": 30},
        mode="parallel",
        max_pending=4,
        max_labels=15,
        acquisition="qb-mgp",
    )
    campaign = client.post("/campaigns", json=body).json()["id"]
    rng = np.random.default_rng(0)

    def f(x: list[float]) -> float:
        return float(sim.sample(np.array([x]), rng)[0])

    # The initial design is out at once; nothing more until it is labeled and a model chose.
    design = [_next(client, campaign).json() for _ in range(3)]
    assert len({tuple(p["x"]) for p in design}) == 3
    assert _next(client, campaign).status_code == 202
    for point in design:
        assert _label(client, campaign, point, f(point["x"])).status_code == 201
    # Then max_pending points are out at once, all different, and no more than that.
    first = _next(client, campaign, wait=60)
    assert first.status_code == 200, first.text
    batch = [first.json()] + [_next(client, campaign).json() for _ in range(3)]
    assert len({tuple(p["x"]) for p in batch}) == 4
    assert not {tuple(p["x"]) for p in batch} & {tuple(p["x"]) for p in design}
    full = _next(client, campaign)
    assert full.status_code == 202 and "Retry-After" in full.headers

    # Four simulators, each starting with one point of the batch, label to the end at once.
    lock = threading.Lock()
    out_now: set[tuple] = {tuple(p["x"]) for p in batch}
    created: list[int] = []
    errors: list[str] = []
    most_out = [len(out_now)]

    def simulator(k: int, point: dict):
        pause = np.random.default_rng(k)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(pause.uniform(0.0, 0.05))  # a simulation takes a moment
            r = _label(client, campaign, point, f(point["x"]))
            with lock:
                out_now.discard(tuple(point["x"]))
                if r.status_code == 201:
                    created.append(k)
                else:
                    errors.append(f"label answered {r.status_code}: {r.text}")
            while time.monotonic() < deadline:
                r = _next(client, campaign, wait=5)
                if r.status_code == 410:
                    return
                if r.status_code == 200:
                    break
                if r.status_code != 202:
                    errors.append(f"next answered {r.status_code}: {r.text}")
                    return
            point = r.json()
            x = tuple(point["x"])
            with lock:
                if x in out_now:
                    errors.append(f"{x} handed out while pending")
                out_now.add(x)
                most_out[0] = max(most_out[0], len(out_now))
        errors.append("timed out")

    threads = [threading.Thread(target=simulator, args=(k, p)) for k, p in enumerate(batch)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert most_out[0] <= 4  # never more than max_pending
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "done" and status["n_labeled"] == 15 == 3 + len(created)
    stored = [tuple(x) for x in client.get(f"/campaigns/{campaign}/observations").json()["x"]]
    assert len(stored) == len(set(stored)) == 15  # no point labeled twice
    # labels kept arriving while models were fitted, yet refits ran one after another; a batch
    # holds at most 4 points, so the 12 labels after the design needed at least 3 models
    models = [
        e for e in client.get(f"/campaigns/{campaign}/history").json() if e["event"] == "model"
    ]
    spans = sorted((m["started_at"], m["at"]) for m in models)
    assert len(spans) >= 3 and all(a < b for a, b in spans)
    assert all(end <= start for (_, end), (start, _) in pairwise(spans)), spans


def test_a_campaign_whose_refit_waits_to_run_again_is_not_stalled():
    """A parallel campaign whose batch is labeled and whose last refit failed: while that refit
    waits to run again (``retry_at``), ``/next`` says wait, not stalled; with no retry coming
    and runs failed, stalled."""
    rules = loop.Rules(
        max_labels=50, design_index=(0, 1), mode="parallel", max_pending=2, allow_repeats=False
    )
    refit = loop.Refit(model_version=10, failures=1, retry_at=1_000_010.0, n_failed=1)
    snap = loop.Snapshot(
        n_labeled=12,
        n_pending=0,
        pending=frozenset(),
        labeled=frozenset(range(12)),
        refit=refit,
        ranking=(10, 11),
        failures={40: 1},
    )
    assert not loop.stalled(rules, snap)
    assert not isinstance(loop.next_answer(rules, snap), loop.Stalled)
    gone = replace(snap, refit=replace(refit, retry_at=0.0))
    assert loop.stalled(rules, gone) and isinstance(loop.next_answer(rules, gone), loop.Stalled)
