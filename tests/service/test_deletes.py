"""A delete racing the calls that write a campaign's keys, against the real Redis: whatever
comes after the delete writes nothing, so no key of the campaign is left behind."""

import threading
import time

import pytest
from redis import Redis
from rq.job import JobStatus

from service.errors import NotFound
from service.queues import REFIT, fetch_job, queue
from service.store import CampaignStore


def _keys(redis: Redis, campaign: str) -> list[bytes]:
    return sorted(redis.scan_iter(f"fbgp:c:{campaign}*"))


def _labeled_design_but_one(client, campaign: str) -> str:
    """The design's tickets out, all but the last labeled: the last one's ticket."""
    tickets = [client.get(f"/campaigns/{campaign}/next").json()["ticket"] for _ in range(3)]
    for ticket in tickets[:-1]:
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.5})
        assert r.status_code == 201, r.text
    return tickets[-1]


def test_writes_that_come_after_a_delete_leave_no_key(client, make_body, settings):
    """In the order a race can give them: the label that completes the design is stored and
    asks for a refit, the campaign is deleted, then the refit is enqueued; a look at /next
    that read the campaign before the delete issues its tickets after it; an evaluation is
    recorded after it. None of these may write a key (or enqueue a job)."""
    redis = Redis.from_url(settings.redis_url)
    store = CampaignStore(redis)
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    last = _labeled_design_but_one(client, campaign)
    outcome, n, enqueue = store.record_label(campaign, last, 0.25, time.time(), enqueue=False)
    assert n == 3 and enqueue
    store.delete(campaign)
    assert _keys(redis, campaign) == []
    queued = queue(REFIT, redis).count
    assert store.enqueue_refit(campaign) is None
    assert queue(REFIT, redis).count == queued
    with pytest.raises(NotFound):
        store.issue(campaign, [(5, [1.0], None)], 60.0, time.time())
    store.record_evaluation(campaign, 3, {"nlml": 1.0, "rmse": 1.0, "nlpd_mixture": 1.0})
    assert store.refit_failed(campaign, "boom", 3, "any") is False
    assert _keys(redis, campaign) == []


def test_labels_racing_deletes_over_http_leave_no_key(client, make_body, settings):
    """Labels that complete the design, posted while their campaigns are deleted: every
    campaign's keys are gone once both answered, whichever came first."""
    redis = Redis.from_url(settings.redis_url)
    campaigns = []
    for _ in range(12):
        campaign = client.post("/campaigns", json=make_body()).json()["id"]
        campaigns.append((campaign, _labeled_design_but_one(client, campaign)))
    answers = []

    def label(campaign: str, ticket: str) -> None:
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": 0.1})
        answers.append(r.status_code)

    def delete(campaign: str) -> None:
        answers.append(client.delete(f"/campaigns/{campaign}").status_code)

    threads = []
    for campaign, ticket in campaigns:
        threads += [threading.Thread(target=label, args=(campaign, ticket)),
                    threading.Thread(target=delete, args=(campaign,))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(answers) <= {201, 204, 404}, answers
    time.sleep(1.0)  # a refit enqueued before a delete finds itself not in charge and ends
    for campaign, _ in campaigns:
        assert _keys(redis, campaign) == [], campaign


def test_a_job_that_starts_while_it_is_canceled_is_stopped_not_a_500(redis_url):
    """A DELETE answered 500 when a worker took one of the campaign's jobs between the look at
    its status (queued) and the cancel: RQ 3's cancel then raises ValueError (the run's
    execution record is not there yet). The job is taken off its queue and stopped instead."""
    from service.queues import _cancel

    connection = Redis.from_url(redis_url)
    nobody = queue(f"fbgp-test-nobody-{time.time_ns()}", connection)
    job = nobody.enqueue_call("worker.jobs.refit", args=("gone",))
    job.set_status(JobStatus.STARTED)  # as the worker that took it left it, before its record
    connection.zadd(job.execution_registry.key, {"not-yet": time.time() + 600})
    with pytest.raises(ValueError):
        fetch_job(job.id, connection).cancel()  # what RQ does
    assert nobody.count == 1
    _cancel(connection, job)
    assert nobody.count == 0
    nobody.delete(delete_jobs=True)
