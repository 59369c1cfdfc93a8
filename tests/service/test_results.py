"""A run's result arriving (:mod:`service.results`), told as the API tells it, on the real
Redis and RQ queue (a database no worker serves, so that what is enqueued stays there): the
label that completes the design puts the first refit on the queue, values that do not fit the
campaign are refused with nothing stored, a failure after the design puts a refit on the queue,
and an abandoned ticket frees its point at once."""

import time

import pytest
from rq.job import Job

from fbgp_al.service import results
from fbgp_al.service.refusals import Unprocessable
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.worker.vocabulary.values import LabelValues


@pytest.fixture
def campaign(bare_store, make_body) -> dict:
    bare_store.r.flushdb()
    return bare_store.campaigns.create(CampaignCreate(**make_body()).model_dump())


def _ticket(store, spec: dict, k: int, now: float) -> str:
    """The ``k``-th design point handed out: its ticket."""
    index = spec["design_index"][k]
    x = store.campaigns.pool_points(spec["id"], spec, [index])[0]
    return store.tickets.issue(spec["id"], [(index, x, None)], 60.0, now)[0].ticket


def _queued_job(store, campaign_id: str) -> str | None:
    """The refit job the campaign's state names, if it is on RQ."""
    job = store.campaigns.state(campaign_id).get("refit_job")
    return job if job and Job.exists(job, connection=store.r) else None


def test_the_label_that_completes_the_design_puts_the_first_refit_on_the_queue(
    bare_store, campaign
):
    store, now = bare_store, time.time()
    for k in range(3):
        ticket = _ticket(store, campaign, k, now)
        assert _queued_job(store, campaign["id"]) is None  # no refit before the design's end
        outcome, n = results.label(store, campaign["id"], ticket, LabelValues(0.1 * k), now)
        assert (outcome, n) == ("stored", k + 1)
    assert _queued_job(store, campaign["id"]) is not None
    again = results.label(store, campaign["id"], ticket, LabelValues(0.2), now)
    assert again == ("same_again", 3)


def test_values_that_do_not_fit_the_campaign_are_refused_and_nothing_is_stored(
    bare_store, campaign
):
    store, now = bare_store, time.time()
    ticket = _ticket(store, campaign, 0, now)
    with pytest.raises(Unprocessable, match="noise"):  # no known noise in this campaign
        results.label(store, campaign["id"], ticket, LabelValues(0.1, noise=0.01), now)
    with pytest.raises(Unprocessable, match="one output"):
        results.label(store, campaign["id"], ticket, LabelValues({"drag": 0.1}), now)
    assert store.labels.all(campaign["id"]) == []
    assert results.label(store, campaign["id"], ticket, LabelValues(0.1), now)[1] == 1


def test_a_failure_after_the_design_puts_a_refit_on_the_queue(bare_store, campaign):
    store, now = bare_store, time.time()
    tickets = [_ticket(store, campaign, k, now) for k in range(3)]
    assert results.fail(store, campaign["id"], tickets[0], "the mesh broke", now) == ("stored", 1)
    assert _queued_job(store, campaign["id"]) is None  # in the design: its reserve stands in
    for k in (1, 2):
        results.label(store, campaign["id"], tickets[k], LabelValues(0.5), now)
    first = _queued_job(store, campaign["id"])
    assert first is None  # two of three design points labeled: the design is not done
    ticket = _ticket(store, campaign, 0, now)  # its point again (max_retries 0: the reserve's)
    results.label(store, campaign["id"], ticket, LabelValues(0.5), now)
    assert _queued_job(store, campaign["id"]) is not None


def test_an_abandoned_ticket_frees_its_point_at_once(bare_store, campaign):
    store, now = bare_store, time.time()
    ticket = _ticket(store, campaign, 0, now)
    assert store.tickets.n_pending(campaign["id"], now) == 1
    assert results.abandon(store, campaign["id"], ticket, now) == ("stored", 1)
    assert store.tickets.n_pending(campaign["id"], now) == 0
    assert results.abandon(store, campaign["id"], ticket, now) == ("same_again", 1)
    assert results.abandon(store, campaign["id"], "never-issued", now)[0] == "unknown_ticket"
