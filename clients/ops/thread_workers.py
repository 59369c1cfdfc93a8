"""RQ workers in threads of one process, and a scoring worth parts whatever its work: what
``fbgp-al label-path`` (:mod:`clients.ops.label_path`) runs its traced refit on, so that the
refit finds another worker idle and fans out as it does on a stack of several workers."""

from __future__ import annotations

import contextlib
import threading
import time


@contextlib.contextmanager
def shared_scoring():
    """A scoring worth parts whatever its work (``fanout.SHARE_MIN_WORK`` 0 meanwhile): the
    traced refit is too small to be worth them, and their path is traced all the same."""
    from fbgp_al.service.jobs import fanout

    least = fanout.SHARE_MIN_WORK
    fanout.SHARE_MIN_WORK = 0
    try:
        yield
    finally:
        fanout.SHARE_MIN_WORK = least


def run_workers(connection, hands: int = 2, seconds: float = 600.0, quiet: float = 2.0) -> None:
    """The queued jobs run by ``hands`` RQ workers, each in a thread of this process, until
    none has had a job for ``quiet`` seconds (or ``seconds`` have passed): all register and
    idle before any takes a job, so that a refit finds the others idle and fans out (its chains
    as one group each, the merge after them, its scoring in parts). Each worker says it is a
    host of its own, for one worker a process is counted (:func:`service.queues.workers`)."""
    from rq import SimpleWorker
    from rq.timeouts import TimerDeathPenalty
    from rq.worker import WorkerStatus

    from fbgp_al.service.queues import QUEUES, SERIALIZER, PlainJob

    started, done = threading.Event(), threading.Event()
    ready = threading.Barrier(hands, action=started.set)
    busy: set[str] = set()

    class Hand(SimpleWorker):
        death_penalty_class = TimerDeathPenalty  # a job's timeout in a thread
        waited = False

        def _install_signal_handlers(self):  # signals reach the main thread only
            pass

        def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
            busy.discard(self.name)
            if not self.waited:
                self.set_state(WorkerStatus.IDLE)
                ready.wait(seconds)
                self.waited = True
            while not done.is_set():
                found = super().dequeue_job_and_maintain_ttl(1, 1)
                if found is not None:
                    busy.add(self.name)
                    return found
            return None

    def run(k: int) -> None:
        hand = Hand(
            list(QUEUES),
            connection=connection,
            serializer=SERIALIZER,
            job_class=PlainJob,
            name=f"thread-worker-{k}",
        )
        hand.hostname = f"thread-worker-{k}"
        hand.work(logging_level="WARNING", max_idle_time=1)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(hands)]
    for thread in threads:
        thread.start()
    deadline, since = time.monotonic() + seconds, time.monotonic()
    while time.monotonic() < deadline and not done.is_set():
        time.sleep(0.1)
        if busy or not started.is_set():
            since = time.monotonic()
        elif time.monotonic() - since > quiet:
            done.set()
    done.set()
    for thread in threads:
        thread.join(seconds)
