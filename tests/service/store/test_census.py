"""The campaigns counted by state (:mod:`service.store.census`), against the real Redis: a
campaign whose failed runs exceed its ``max_failures`` counts as ``failing``, one with no point
left to offer as ``stalled``, the others under their phase; every campaign is counted once."""

import time

from fbgp_al.service.schemas.campaigns import CampaignCreate


def _create(store, make_body, **changes) -> dict:
    return store.campaigns.create(CampaignCreate(**make_body(**changes)).model_dump())


def _fail_design_point(store, spec: dict, k: int, now: float) -> None:
    """The campaign's ``k``-th design point handed out and its run failed."""
    index = spec["design_index"][k]
    x = store.campaigns.pool_points(spec["id"], spec, [index])[0]
    ticket = store.tickets.issue(spec["id"], [(index, x, None)], 60.0, now)[0].ticket
    assert store.runs.fail(spec["id"], ticket, "the mesh broke", now)[0] == "stored"


def test_failing_and_stalled_campaigns_are_counted_under_those_states(bare_store, make_body):
    store = bare_store
    store.r.flushdb()
    now = time.time()
    _create(store, make_body)  # in design, nothing failed
    failing = _create(store, make_body, max_failures=0)
    _fail_design_point(store, failing, 0, now)
    # three grid points, all in the design: once each has failed, none is left to offer
    stalled = _create(store, make_body, pool={"type": "grid", "points_per_dim": 3}, max_labels=3)
    for k in range(3):
        _fail_design_point(store, stalled, k, now)
    once_failed = _create(store, make_body)  # one failure of many allowed: still in design
    _fail_design_point(store, once_failed, 0, now)

    counts = store.census.count_by_state(now)
    assert counts["failing"] == 1 and counts["stalled"] == 1 and counts["design"] == 2
    assert sum(counts.values()) == 4
    # by phase alone, all four are in design
    assert store.campaigns.count_by_phase()["design"] == 4
