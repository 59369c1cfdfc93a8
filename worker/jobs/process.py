"""The worker process: an RQ worker serving the queues (high priority first) with one torch
thread, whose maintenance also revives dead refits (the same rule as ``/next``'s,
:func:`service.supervision.refit_dead`, through :meth:`service.store.refits.Refits.revive_all`).
It reads jobs as JSON and runs only fbgp-al's own (:class:`service.queues.PlainJob`)."""

from __future__ import annotations

import logging
import os
import resource
import time

import torch
from redis import Redis
from redis.exceptions import AuthenticationError, RedisError
from rq import Worker
from rq.exceptions import DeserializationError

from fbgp_al.service.observability import json_logging
from fbgp_al.service.queues import LIGHT, QUEUES, SERIALIZER, PlainJob, take_turns
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker import jobs  # noqa: F401  (loaded here, before the work horses fork: see run_worker)
from fbgp_al.worker.mcmc import sample_posterior

log = logging.getLogger("fbgp.worker")


def vm_size() -> int:
    """This process's virtual memory size (``VmSize``), bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmSize in /proc/self/status")


def bound_memory(budget_mb: int) -> int | None:
    """Bound this process's address space (``RLIMIT_AS``) to its size now plus ``budget_mb``
    MiB, so that an allocation beyond it fails (MemoryError) instead of taking the machine.
    A warm worker maps about 1.1 GB already (torch, the compiled sampler), though it holds
    far less. The bound in bytes, or None (``budget_mb`` 0: no bound)."""
    if budget_mb <= 0:
        return None
    limit = vm_size() + budget_mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit


class FbgpWorker(Worker):
    """An RQ worker whose maintenance also revives the refits of campaigns left stuck by a dead
    worker, so that a campaign recovers even when no simulator is polling it; each work horse
    (one forked per job) may map at most ``job_memory_mb`` more than the worker
    (:func:`bound_memory`); a job that is not one of fbgp-al's, or not JSON, fails there
    before anything of it runs (:class:`service.queues.PlainJob`), and the worker goes on."""

    # SIGTERM or SIGINT came (RQ says so only when a job runs); on the class, since the handler
    # of a worker that lost Redis may be the one that hears it
    shutdown_requested = False

    def handle_warm_shutdown_request(self):
        FbgpWorker.shutdown_requested = True
        super().handle_warm_shutdown_request()

    def reorder_queues(self, reference_queue):
        """After a job from ``reference_queue``: that queue goes last among its lane's, so
        that tenants take turns (:func:`service.queues.take_turns`)."""
        self._ordered_queues = take_turns(self._ordered_queues, reference_queue.name)

    def main_work_horse(self, job, queue):
        try:
            bound_memory(get_settings().job_memory_mb)
        except (OSError, ValueError) as error:
            log.warning("the job's memory is not bounded: %s", error)
        super().main_work_horse(job, queue)

    def perform_job(self, job, queue, execution):
        try:
            job.func_name  # noqa: B018  (reads its call: one not fbgp-al's is refused here)
        except DeserializationError as refused:  # RQ fails it below, running nothing
            log.error(
                "a job on %s refused, nothing of it runs: %s",
                queue.name,
                refused,
                extra={"job": job.id},
            )
        return super().perform_job(job, queue, execution)

    def run_maintenance_tasks(self):
        super().run_maintenance_tasks()
        settings = get_settings()
        try:
            revived = CampaignStore(self.connection).revive_all(
                time.time(), settings.refit_lease_seconds
            )
        except RedisError as error:
            log.warning("could not look for stuck refits: %s", error)
            return
        for campaign_id in revived:
            log.warning(
                "refit queued again: its job had died, or its back-off ran out",
                extra={"campaign": campaign_id},
            )


def run_worker(name: str | None = None, burst: bool = False, light: bool = False) -> None:
    """Serve the queues (high priority first; a ``light`` worker never the long refits' queue,
    :func:`service.queues.refit_queue`) with one torch thread, the sampler compiled before the
    first job. Work horses are forked from this process, so they start warm: the jobs' module
    and all it imports are loaded here once (imported in each horse, they cost every job about
    0.35 s, half of a typical ``/evaluate`` job's time). When Redis goes
    away the worker keeps trying to reach it, and serves again once it is back."""
    queues = LIGHT if light else QUEUES
    torch.set_num_threads(1)

    sample_posterior([[0.5]], [0.0], chains=1, warmup=2, samples=2)  # compile the sampler now
    json_logging()
    log.info(
        "worker pid %d on cores %s, %d torch thread, queues %s",
        os.getpid(),
        sorted(os.sched_getaffinity(0)),
        torch.get_num_threads(),
        ", ".join(queues),
    )
    settings = get_settings()
    attempt = 0
    while True:
        try:
            connection = Redis.from_url(settings.redis_url)
            worker = FbgpWorker(
                list(queues),
                connection=connection,
                log_job_description=False,
                serializer=SERIALIZER,
                job_class=PlainJob,
                name=name if attempt == 0 else None,  # a dead registration may hold the name
                worker_ttl=settings.worker_ttl,
                maintenance_interval=settings.maintenance_interval,
                job_monitoring_interval=settings.job_monitoring_interval,
            )
            worker.work(burst=burst)
        except AuthenticationError as error:  # no waiting mends a missing or wrong password
            log.error(
                "Redis refused this worker (%s): FBGP_REDIS_URL needs the stack's "
                "password, redis://:PASSWORD@host:port/0",
                error,
            )
            raise SystemExit(2) from error
        except RedisError as error:
            log.error("Redis unreachable: %s", error)
        if burst or FbgpWorker.shutdown_requested:
            return
        attempt += 1
        log.warning("the worker lost Redis; starting again in 2 s")
        time.sleep(2.0)
        if FbgpWorker.shutdown_requested:  # asked to stop while we waited
            return
