"""A campaign's status as the routes and pages answer it (:mod:`service.routes.bodies`), read from
a store no worker serves: a fresh campaign is in its design with nothing out, a ticket issued
counts as pending, failed runs count and stall a campaign with no point left to offer, and a
campaign deleted meanwhile is left out of a list of statuses."""

import time

from fbgp_al.service.routes import bodies
from fbgp_al.service.schemas.campaigns import CampaignCreate


def test_the_status_follows_the_campaigns_tickets_and_runs(bare_store, make_body):
    store = bare_store
    body = make_body(
        pool={"type": "points", "points": [[0.5], [1.5]]},
        max_labels=2,
        initial_design={"type": "maximin-lhs", "size": 1},
    )
    campaign = store.campaigns.create(CampaignCreate(**body).model_dump())["id"]
    now = time.time()
    fresh = bodies.status(store, campaign, now)
    assert fresh["id"] == campaign and fresh["name"] == "test" and fresh["team"] is None
    assert (fresh["state"], fresh["refit"], fresh["n_labeled"], fresh["n_pending"]) == (
        "design",
        "idle",
        0,
        0,
    )
    assert fresh["model_version"] is None and fresh["stopped_by"] is None
    assert not fresh["stalled"] and not fresh["failing"] and fresh["n_failed"] == 0
    assert fresh["inputs"] == body["inputs"] and fresh["max_labels"] == 2
    tickets = store.tickets.issue(campaign, [(0, [0.5], None), (1, [1.5], None)], 60.0, now)
    assert bodies.status(store, campaign, now)["n_pending"] == 2
    for ticket in tickets:  # both points fail: none is left to offer, nothing is out
        store.runs.fail(campaign, ticket.ticket, "mesh broke", now)
    failed = bodies.status(store, campaign, now)
    assert failed["n_failed"] == 2 and failed["n_pending"] == 0 and failed["stalled"]
    other = store.campaigns.create(CampaignCreate(**make_body(name="other")).model_dump())["id"]
    store.campaigns.delete(campaign)
    assert [s["id"] for s in bodies.statuses(store, [campaign, other])] == [other]
