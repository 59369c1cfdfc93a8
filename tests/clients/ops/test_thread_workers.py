"""RQ workers in threads of one process (:mod:`clients.ops.thread_workers`): each registers as a
host of its own and idles before any takes a job, they run what is queued and stop once none has
had a job for a while; a scoring is worth parts meanwhile, and not after."""

import threading
import time

from redis import Redis
from rq import Worker
from rq.job import JobStatus

from fbgp_al.clients.ops.thread_workers import run_workers, shared_scoring
from fbgp_al.service import queues
from fbgp_al.service.jobs import fanout
from fbgp_al.service.store import CampaignStore


def test_workers_in_threads_run_the_queued_jobs_then_stop(redis_url):
    connection = Redis.from_url(redis_url.rsplit("/", 1)[0] + "/12")  # a database of its own
    connection.flushdb()
    try:
        queue = queues.queue(queues.REFIT, connection)
        # scoring parts whose scoring is gone: each job runs and fails at once
        jobs = [
            queue.enqueue_call("fbgp_al.service.jobs.score_part", args=(f"none:{k}", 0))
            for k in range(3)
        ]
        seen = []

        def watch():  # the workers as a refit would count them, once they run
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(seen) < 1:
                hands = CampaignStore(connection).jobs.workforce(time.time()).hands
                if len(hands) == 2:
                    seen.append(sorted(h.name for h in hands))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        t = time.monotonic()
        run_workers(connection, quiet=0.5, seconds=120)
        watcher.join(60)
        assert time.monotonic() - t < 60
        assert {job.get_status(refresh=True) for job in jobs} == {JobStatus.FAILED}
        assert seen == [["thread-worker-0", "thread-worker-1"]]  # two hosts: both counted
        assert Worker.all(connection=connection) == []  # both gone
    finally:
        connection.flushdb()


def test_a_scoring_is_worth_parts_only_meanwhile():
    least = fanout.SHARE_MIN_WORK
    with shared_scoring():
        assert fanout.SHARE_MIN_WORK == 0
        assert fanout.scoring_parts(2048, 1.0, _two_idle(), "c", queues.REFIT) is not None
    assert least == fanout.SHARE_MIN_WORK
    assert fanout.scoring_parts(2048, 1.0, _two_idle(), "c", queues.REFIT) is None


def _two_idle():
    from fbgp_al.service.store.jobs import Hand, Workforce

    hands = tuple(Hand(f"w{k}", frozenset({queues.REFIT}), "idle") for k in range(2))
    return Workforce(hands, 0, frozenset())
