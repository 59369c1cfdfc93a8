"""Jobs the workers should not trust: whoever can write to Redis (a worker on another host has
its password) can put a job on a queue. A job whose payload is a pickle, or that names a
function other than fbgp-al's jobs, runs nothing on a worker: it fails, and the worker goes on
serving (a real redis-server and the tests' real worker); nor does a pickle in a job's record
run anything where the API reads it."""

import pathlib
import pickle
import time

import pytest
from redis import Redis
from rq import Queue
from rq.serializers import DefaultSerializer, JSONSerializer

from fbgp_al.service.queues import HIGH, REFIT


class Touch:
    """What an attacker pickles: unpickling it creates ``path`` (any code would do)."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    def __reduce__(self):
        return pathlib.Path.touch, (self.path,)


def _status(redis: Redis, job_id: str, seconds: float = 60) -> str:
    """The job's status once a worker is done with it (RQ's job hash, read as is)."""
    deadline = time.monotonic() + seconds
    status = None
    while time.monotonic() < deadline:
        status = (redis.hget(f"rq:job:{job_id}", "status") or b"").decode()
        if status in ("finished", "failed", "stopped", "canceled"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} not done within {seconds} s: {status!r}")


def test_a_pickled_or_foreign_job_runs_nothing_and_the_worker_goes_on(
    client, make_body, settings, tmp_path
):
    redis = Redis.from_url(settings.redis_url)
    pickled, named = tmp_path / "unpickled", tmp_path / "called"
    # RQ's default serializer: a pickle whose loading calls Path.touch, on the high queue and
    # on a refit queue
    attacker = [
        Queue(name, connection=redis, serializer=DefaultSerializer) for name in (HIGH, REFIT)
    ]
    jobs = [
        q.enqueue_call("fbgp_al.service.jobs.predict", args=(Touch(pickled), [[1.0]]))
        for q in attacker
    ]
    # valid JSON, naming a function that is not one of the jobs
    for name in (HIGH, REFIT):
        foreign = Queue(name, connection=redis, serializer=JSONSerializer)
        jobs.append(foreign.enqueue_call("os.system", args=[f"touch {named}"]))
    for job in jobs:
        assert _status(redis, job.id) == "failed"
    assert not pickled.exists(), "a pickled job ran code on the worker"
    assert not named.exists(), "a job naming another function ran it on the worker"
    # the worker goes on serving: a campaign's refit completes
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    x, y = [[0.6], [1.1], [1.7], [2.3]], [0.1, -0.2, 0.5, 2.0]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y})
    assert r.status_code == 201, r.text
    deadline = time.monotonic() + 120
    while client.get(f"/campaigns/{campaign}").json()["model_version"] != 4:
        assert time.monotonic() < deadline, "no model after the refused jobs"
        time.sleep(0.05)
    assert not pickled.exists() and not named.exists()


def test_a_pickle_in_a_jobs_record_runs_nothing_where_the_api_stops_it(redis_url, tmp_path):
    """The API reads a campaign's jobs to stop them (a delete, a failure): a job record whose
    ``meta`` an attacker replaced by a pickle is read without loading it."""
    from fbgp_al.service.queues import stop_jobs

    redis = Redis.from_url(redis_url)
    marker = tmp_path / "unpickled"
    nobody = Queue(
        f"fbgp-test-nobody-{time.time_ns()}", connection=redis, serializer=JSONSerializer
    )
    job = nobody.enqueue_call("fbgp_al.service.jobs.refit", args=["gone"])
    redis.hset(job.key, "meta", pickle.dumps(Touch(marker)))
    stop_jobs(redis, [job.id])
    assert not marker.exists(), "the API loaded a pickle from Redis"
    assert (redis.hget(job.key, "status") or b"").decode() == "canceled"
    nobody.delete(delete_jobs=True)


def test_a_job_naming_a_callback_or_a_webhook_is_refused_and_neither_is_used(redis_url):
    """fbgp-al's jobs have no callback and no webhook: a job that names one is refused, and the
    name is never imported (RQ would call a failure callback even for a job it could not
    read)."""
    from rq.callbacks import Callback
    from rq.webhook import Webhook

    from fbgp_al.service.queues import Refused, fetch_job

    redis = Redis.from_url(redis_url)
    nobody = Queue(
        f"fbgp-test-nobody-{time.time_ns()}", connection=redis, serializer=JSONSerializer
    )
    plain = nobody.enqueue_call("fbgp_al.service.jobs.predict", args=["c", [[1.0]]])
    called = nobody.enqueue_call(
        "fbgp_al.service.jobs.predict", args=["c", [[1.0]]], on_failure=Callback("os.system")
    )
    hooked = nobody.enqueue(
        "fbgp_al.service.jobs.predict",
        "c",
        [[1.0]],
        webhooks=[Webhook("http://example.invalid/", "failed")],
    )
    assert fetch_job(plain.id, redis).func_name == "fbgp_al.service.jobs.predict"
    for job_id, why in ((called.id, "callback"), (hooked.id, "webhook")):
        job = fetch_job(job_id, redis)
        with pytest.raises(Refused, match=why):
            job.func_name  # noqa: B018
        assert job.failure_callback is None and job.success_callback is None
    nobody.delete(delete_jobs=True)


def test_a_refit_queued_as_a_pickle_before_an_upgrade_fails_and_is_revived(
    client, make_body, settings, monkeypatch
):
    """A refit that the version before queued as a pickle, still in its queue when the workers
    are upgraded: the worker refuses it, and the campaign's refit is revived as a dead one's
    (by ``/next`` or a worker's maintenance): one ``refit_failed`` in its history, then its
    model."""
    from fbgp_al.service import queues
    from fbgp_al.service.store import CampaignStore

    redis = Redis.from_url(settings.redis_url)
    store = CampaignStore(redis)

    def as_before(connection, campaign_id, job_id, timeout, spec, long=False):
        before = Queue(queues.lane(spec, long), connection=connection, serializer=DefaultSerializer)
        return before.enqueue_call(
            "fbgp_al.service.jobs.refit",
            args=(campaign_id,),
            timeout=timeout,
            result_ttl=600,
            failure_ttl=86400,
            job_id=job_id,
        )

    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    monkeypatch.setattr(queues, "enqueue_refit", as_before)
    x, y = [[0.6], [1.1], [1.7], [2.3]], [0.1, -0.2, 0.5, 2.0]
    _, _, due = store.labels.import_observations(campaign, x, y, time.time())
    assert due and store.refits.requested(campaign, due)
    monkeypatch.undo()
    pickled = store.campaigns.state(campaign)["refit_job"]
    assert _status(redis, pickled) == "failed"
    deadline = time.monotonic() + 120
    while store.campaigns.state(campaign).get("model_version") != "4":
        assert time.monotonic() < deadline, store.campaigns.state(campaign)
        store.revivals.revive(campaign, time.time(), settings.refit_lease_seconds)
        time.sleep(0.1)
    failed = [e for e in store.history.read(campaign) if e["event"] == "refit_failed"]
    assert len(failed) == 1, failed
