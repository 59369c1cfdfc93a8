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
from rq.intermediate_queue import IntermediateQueue
from rq.job import JobStatus
from rq.registry import FailedJobRegistry
from rq.utils import now, utcformat

from fbgp_al.service import jobs  # noqa: F401  (loaded here, before the work horses fork: see run_worker)
from fbgp_al.service.observability import json_logging
from fbgp_al.service.queues import LIGHT, QUEUES, SERIALIZER, PlainJob, take_turns
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store import CampaignStore
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
    # the registration this process held before it lost Redis (kept across a restart of Redis by
    # its append-only file): ended once this one is registered, so that the process counts as a
    # live worker throughout (service.queues.workers counts one registration per process)
    predecessor: Worker | None = None

    def register_birth(self):
        super().register_birth()
        if self.predecessor is not None:
            self.predecessor.register_death()
            self.predecessor = None

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

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """RQ's, but a job whose hash RQ cannot read (a ``status`` it does not know, a
        ``timeout`` that is not a number, ``dependency_ids`` that are not JSON: whoever can
        write to Redis can put one in a queue) is failed here (:func:`fail_unreadable`) and
        the worker takes the next: RQ raises the error out of its work loop, which quits."""
        while True:
            try:
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            except RedisError:
                raise
            except Exception as error:
                job_id, queue = getattr(error, "job_id", None), getattr(error, "queue", None)
                if job_id is None or queue is None:  # not a job's hash: RQ's loop decides
                    raise
                fail_unreadable(self.connection, queue, job_id, error)

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
            revived = CampaignStore(self.connection).revivals.revive_all(
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


UNREADABLE_TTL = 86400  # seconds an unreadable job's failed record is kept (a refit's failure's)


def fail_unreadable(connection, queue, job_id: str, error: Exception) -> None:
    """Fail job ``job_id``, taken off ``queue``, whose hash RQ could not read (``error``):
    nothing of it runs; a log line says what was wrong with it (each field that RQ cannot read,
    :func:`unreadable_fields`); its hash is replaced by a failed job's record that RQ reads (its
    payload kept, the other fields dropped), in the queue's failed jobs for
    :data:`UNREADABLE_TTL` seconds."""
    key = PlainJob.key_for(job_id)
    raw = connection.hgetall(key)
    fields = unreadable_fields(raw, connection)
    why = f"{type(error).__name__} {str(error)[:200]!r}; " + ", ".join(fields)
    message = "job %s on %s fails, nothing of it runs: its hash is malformed (%s)"
    log.error(message, job_id, queue.name, why, extra={"job": job_id})
    ended = utcformat(now())
    record = {"status": JobStatus.FAILED.value, "origin": raw.get(b"origin") or queue.name}
    record |= {"created_at": ended, "ended_at": ended, "failure_ttl": UNREADABLE_TTL}
    record["exc_info"] = f"malformed job hash: {why}"
    with connection.pipeline() as pipe:
        pipe.delete(key)
        if b"data" in raw:
            pipe.hset(key, mapping={"data": raw[b"data"], **record})
            pipe.expire(key, UNREADABLE_TTL)
            registry = FailedJobRegistry(queue.name, connection=connection)
            pipe.zadd(registry.key, {job_id: time.time() + UNREADABLE_TTL})
        pipe.lrem(IntermediateQueue(queue.key, connection).key, 0, job_id)
        pipe.execute()


def unreadable_fields(raw: dict[bytes, bytes], connection) -> list[str]:
    """The fields of a job's hash (``raw``, as Redis gives it) that RQ cannot read, each as
    ``name='value' (the error)``: each read alone beside the payload, by RQ's own reader."""
    out = []
    for field, value in raw.items():
        if field == b"data":
            continue
        try:
            PlainJob("probe", connection=connection).restore({b"data": b"", field: value})
        except Exception as error:  # what RQ raises on it, whatever it is
            name = field.decode(errors="replace")
            shown = value[:80].decode(errors="replace")
            out.append(f"{name}={shown!r} ({type(error).__name__})")
    return out


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
    worker = None
    while True:
        try:
            # the registration to end: the last one that began (a worker that lost Redis
            # before it registered hands on its own predecessor)
            predecessor = None if worker is None else (worker.predecessor or worker)
            connection = Redis.from_url(settings.redis_url, **settings.redis_options())
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
            worker.predecessor = predecessor  # its registration ends once this one's begins
            worker.work(burst=burst)
            lost = "RQ's work loop ended (its log says why)"
        except AuthenticationError as error:  # no waiting mends a missing or wrong password
            log.error(
                "Redis refused this worker (%s): FBGP_REDIS_URL needs the stack's "
                "password, redis://:PASSWORD@host:port/0",
                error,
            )
            raise SystemExit(2) from error
        except RedisError as error:
            if "CERTIFICATE_VERIFY_FAILED" in str(error):  # a CA file mounted anew mends it
                log.error(
                    "Redis's TLS certificate was not accepted (%s): FBGP_REDIS_CA_FILE names "
                    "the CA that signed it, and the certificate names FBGP_REDIS_URL's host",
                    error,
                )
            else:
                log.error("Redis unreachable: %s", error)
            lost = "the worker lost Redis"
        if burst or FbgpWorker.shutdown_requested:
            return
        attempt += 1
        log.warning("%s; starting again in 2 s", lost)
        time.sleep(2.0)
        if FbgpWorker.shutdown_requested:  # asked to stop while we waited
            return
