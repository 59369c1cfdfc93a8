"""Queue names and the lane a refit takes, enqueueing by dotted name, waiting for a short job,
stopping jobs, and RQ's facts about a job and the workers; shared by the API and the workers
(no torch). What a job costs (its work, its timeout) is :mod:`service.costs`.

Every job, its arguments and its result are JSON (:data:`SERIALIZER`), never a pickle, and a
worker runs a job only if it calls one of fbgp-al's jobs (:data:`JOBS`, :class:`PlainJob`):
whoever can write to Redis (a worker on another host has its password) can put a job on a
queue, but cannot make a worker run code of theirs. Every queue, job and worker the project
makes goes through :func:`queue`, :func:`fetch_job` and :func:`workers`, or names
:data:`SERIALIZER` and :class:`PlainJob` (the worker process)."""

from __future__ import annotations

import contextlib
import logging
import zlib
from datetime import UTC, datetime

from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.command import send_stop_job_command
from rq.exceptions import DeserializationError, InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus
from rq.registry import CanceledJobRegistry
from rq.serializers import JSONSerializer
from rq.utils import utcparse

from fbgp_al.service import costs
from fbgp_al.service.job_results import REFIT_RESULT_TTL
from fbgp_al.service.supervision import JobFacts

HIGH = "fbgp-high"  # predictions, acquisitions, evaluations: short, a client waits on them
HIGH_LONG = "fbgp-high-long"  # model calls that take long (costs.long_call): no light worker's
REFIT = "fbgp-refit"  # NUTS refits and scoring
LONG = "fbgp-refit-long"  # the refits of campaigns whose refits take long (refit_queue)
# Refits queue by tenant, so that a team that queues a thousand refits does not make another
# team's wait behind all of them: the campaigns a team's token created go to one of TENANTS - 1
# queues of each lane, the team's tenant, given when the team is made (the one the fewest
# teams have; tenant 0: the campaigns created without a team, in the queues' old names), and a
# worker takes each lane's queues with jobs in turn (take_turns), so a refit waits behind about
# one job of each other tenant per worker. Fixed, not a setting: a job queued under a tenant
# that no worker serves would wait for ever.
TENANTS = 8
REFITS = (REFIT, *(f"{REFIT}-tenant-{t}" for t in range(1, TENANTS)))
LONGS = (LONG, *(f"{LONG}-tenant-{t}" for t in range(1, TENANTS)))
QUEUES = (HIGH, HIGH_LONG, *REFITS, *LONGS)  # workers serve model calls first, long refits last
LIGHT = (HIGH, *REFITS)  # a light worker's: it keeps to short calls and ordinary refits


def tenant(team: str | None) -> int:
    """The tenant by a team's name alone: 0 without a team, else one of 1 .. TENANTS - 1 by a
    hash of the name. For a team made before teams were given tenants (and a campaign of one,
    whose spec has no ``tenant``); teams made since have the one they were given."""
    return 0 if not team else 1 + zlib.crc32(team.encode()) % (TENANTS - 1)


def campaign_tenant(spec: dict) -> int:
    """The tenant of a campaign's refits: its spec's (its team's when it was created), or by
    its team's name for a campaign stored before tenants (:func:`tenant`)."""
    given = spec.get("tenant")
    return tenant(spec.get("team")) if given is None else int(given) % TENANTS


def ordinary(queue: str) -> str:
    """The ordinary refits' queue of ``queue``'s tenant (``queue`` itself if it is one):
    where the parts of a long refit's scoring go, which light workers serve too."""
    return REFITS[LONGS.index(queue)] if queue in LONGS else queue


def take_turns(ordered: list, served: str, name=lambda queue: queue.name) -> list:
    """The order of a worker's queues after it took a job from ``served``: that queue goes
    last among its lane's (:data:`REFITS` or :data:`LONGS`), the others keep their places, so
    the tenants with jobs waiting take turns; the high queue stays first. ``name``: a queue's
    name (RQ's ``Queue`` objects by default)."""
    for lane in (REFITS, LONGS):
        members = [q for q in ordered if name(q) in lane]
        names = [name(q) for q in members]
        if served not in names:
            continue
        at = names.index(served)
        turn = iter(members[at + 1 :] + members[: at + 1])
        return [next(turn) if name(q) in lane else q for q in ordered]
    return list(ordered)


# Jobs and results as JSON: Python's json writes a float as the shortest text that reads back as
# the same double (NaN and infinities as NaN, Infinity), so numbers cross exactly; big arrays
# cross as the base64 of their float64 bytes (worker.scoring.pack)
SERIALIZER = JSONSerializer
# the functions a worker runs, by the dotted names they are enqueued under (service/jobs/)
JOBS = frozenset(
    f"fbgp_al.service.jobs.{name}"
    for name in (
        "refit",
        "refit_chains",
        "refit_merge",
        "score_part",
        "predict",
        "acquisition",
        "evaluate",
        "plot",
        "sensitivity",
    )
)
# the names the same jobs were enqueued under before, which a job stored then still has: before
# the one import name (``worker.jobs.refit``), and while the jobs lived in worker/
# (``fbgp_al.worker.jobs.refit``); such a job runs as the job of today of its name
FORMER_NAMES = {
    f"{former}.{job.rpartition('.')[2]}": job
    for job in JOBS
    for former in ("worker.jobs", "fbgp_al.worker.jobs")
}


class Refused(DeserializationError):
    """A job a worker does not run: its payload is not JSON, or not a call of one of
    :data:`JOBS` with plain arguments, or it names a callback or a webhook."""


class PlainJob(Job):
    """RQ's job as fbgp-al reads it: always with :data:`SERIALIZER` (whatever a caller passes),
    its call refused (:class:`Refused`, raised where RQ would read it: the work horse fails
    the job before anything of it runs) unless it names one of :data:`JOBS` (or its former
    name, :data:`FORMER_NAMES`), on no instance, with a list of arguments and a dict of
    keywords; and never a callback or a webhook, which
    fbgp-al's jobs do not have: those a job names are neither imported nor sent."""

    def __init__(self, id: str | None = None, connection=None, serializer=None):  # noqa: A002
        super().__init__(id, connection=connection, serializer=SERIALIZER)

    def _deserialize_data(self):
        try:
            call = self.serializer.loads(self.data)
        except Exception as error:  # not JSON (a pickle, say): nothing of it is read
            raise Refused(
                f"job {self.id}: its payload is not JSON ({type(error).__name__})"
            ) from error
        if isinstance(call, list) and call and isinstance(call[0], str):
            call[0] = FORMER_NAMES.get(call[0], call[0])  # stored under a former name
        why = _refusal(call, self)
        if why:
            raise Refused(f"job {self.id}: {why}")
        self._func_name, self._instance, self._args, self._kwargs = call

    @property
    def success_callback(self):
        return None

    @property
    def failure_callback(self):
        return None

    @property
    def stopped_callback(self):
        return None

    def send_webhooks(self, status, *, exc_string=None) -> None:
        return None


def _refusal(call, job: Job) -> str | None:
    """Why a job's call (its JSON payload, read) is not one a worker runs; None if it is."""
    if not (isinstance(call, list) and len(call) == 4):
        return "its payload is not a call (function, instance, arguments, keywords)"
    name, instance, args, kwargs = call
    if name not in JOBS:
        return f"it calls {str(name)[:200]!r}, which is not one of fbgp-al's jobs"
    if instance is not None or not isinstance(args, list) or not isinstance(kwargs, dict):
        return "its call is not a function's, with a list of arguments and a dict of keywords"
    if job._success_callback_name or job._failure_callback_name or job._stopped_callback_name:
        return "it names a callback"
    if job.webhooks:
        return "it names a webhook"
    return None


def queue(name: str, connection) -> Queue:
    """RQ's queue ``name``, its jobs JSON (:class:`PlainJob`)."""
    return Queue(name, connection=connection, serializer=SERIALIZER, job_class=PlainJob)


def fetch_job(job_id: str, connection) -> PlainJob:
    """A job, read as JSON (:class:`PlainJob`); NoSuchJobError if there is none."""
    return PlainJob.fetch(job_id, connection=connection, serializer=SERIALIZER)


def workers(connection) -> list[Worker]:
    """The workers that are alive: those registered with RQ whose registration has not
    expired, one per process (host and pid), its latest. A worker that lost Redis registers
    again under a new name, then ends its old registration (kept by the append-only file across
    a restart of Redis), so that the process counts throughout; were the old one left, it
    would count until it expires (readiness counted 4 workers while 2 ran)."""
    latest: dict[tuple, Worker] = {}
    for worker in Worker.all(connection=connection, job_class=PlainJob, serializer=SERIALIZER):
        process = (worker.hostname, worker.pid) if worker.pid else (worker.name,)
        if process not in latest or _beat(worker) > _beat(latest[process]):
            latest[process] = worker
    return list(latest.values())


def _beat(worker: Worker) -> float:
    """When the worker last said it was alive (its registration's time if it never did)."""
    when = worker.last_heartbeat or worker.birth_date
    return when.timestamp() if when is not None else 0.0


def load(connection) -> tuple[list[Worker], int]:
    """The workers (:func:`workers`) and the jobs waiting on all queues: what a refit counts
    before it takes idle workers (:meth:`service.store.jobs.Jobs.workforce`)."""
    alive = workers(connection)
    with connection.pipeline(transaction=False) as pipe:
        for name in QUEUES:
            pipe.llen(queue(name, connection).key)
        return alive, sum(pipe.execute())


# what a job that ran out of memory says (Python's MemoryError; torch's and numpy's allocators)
log = logging.getLogger("fbgp.queues")


def refit_queue(spec: dict, n: int, last_seconds: float | None, settings) -> str:
    """The long lane (:data:`LONGS`) for a campaign whose last refit (``last_seconds``: the last
    model's, or longer, one that failed since, a timeout above all) took more than
    ``long_refit_seconds`` or, before its first model, whose refit's work
    (:func:`service.costs.refit_work`, or its scoring's) is beyond the ``long_refit_*`` bounds
    (:func:`service.costs.long_refit`); else the ordinary one (:data:`REFITS`); in either, its
    team's queue (:func:`campaign_tenant`; no team: :data:`LONG` or :data:`REFIT`). Light workers
    never take the long lane, so a campaign of long refits (one that is greedy, or just large) never
    holds every worker from the small ones."""
    return lane(spec, costs.long_refit(spec, n, last_seconds, settings))


def lane(spec: dict, long: bool) -> str:
    return (LONGS if long else REFITS)[campaign_tenant(spec)]


def enqueue_refit(
    connection, campaign_id: str, job_id: str, timeout: int, spec: dict, long: bool = False
):
    """A refit job on the campaign's lane (:func:`refit_queue`: ``long`` or not, its team's)."""
    return queue(lane(spec, long), connection).enqueue_call(
        "fbgp_al.service.jobs.refit",
        args=(campaign_id,),
        timeout=timeout,
        result_ttl=REFIT_RESULT_TTL,
        failure_ttl=86400,
        job_id=job_id,
    )


def enqueue_short(
    connection, name: str, *args, timeout: int = 600, job_id: str | None = None, long: bool = False
):
    """A model-based answer (``predict``, ``acquisition``, ``evaluate``) on the high queue, or,
    ``long`` (:func:`service.costs.long_call`), on the long calls' queue."""
    return queue(HIGH_LONG if long else HIGH, connection).enqueue_call(
        f"fbgp_al.service.jobs.{name}",
        args=args,
        timeout=timeout,
        result_ttl=120,
        failure_ttl=600,
        job_id=job_id,
    )


def stop_jobs(connection, job_ids: list[str]) -> None:
    """Stop jobs: one running is killed on its worker (its work horse, at once: RQ marks it
    stopped), one waiting is canceled; one gone or ended already is left alone."""
    for job_id in job_ids:
        try:
            job = fetch_job(job_id, connection)
            status = job.get_status(refresh=False)
            if status == JobStatus.STARTED:
                send_stop_job_command(connection, job_id, serializer=SERIALIZER)
            elif status in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
                _cancel(connection, job)
        except (NoSuchJobError, InvalidJobOperation):
            continue
        except RedisError as error:  # what is not stopped ends by itself: it is fenced off
            log.warning("job %s not stopped: %s", job_id, error)


CANCELED_TTL = 600  # seconds a canceled job's record is kept (RQ keeps it for ever)


def _cancel(connection, job: Job) -> None:
    """Cancel a waiting job; its record expires after :data:`CANCELED_TTL` seconds (RQ's
    cancel keeps it, a large call's points inside, and its id in the canceled jobs, for ever).
    When a worker takes it between the look at its status and the cancel, RQ 3's ``cancel``
    raises ValueError (the run's execution record is not there yet, or gone): then it is taken
    off its queue and, if it runs, stopped (its run's end gives it its TTL)."""
    try:
        job.cancel()
    except ValueError as error:
        queue(job.origin, connection).remove(job.id)
        with contextlib.suppress(InvalidJobOperation, NoSuchJobError):  # not running (yet)
            send_stop_job_command(connection, job.id, serializer=SERIALIZER)
        log.warning("job %s started while it was canceled; stopping it: %s", job.id, error)
        return
    with connection.pipeline() as pipe:
        pipe.expire(job.key, CANCELED_TTL)
        pipe.expire(job.dependents_key, CANCELED_TTL)
        pipe.zrem(CanceledJobRegistry(job.origin, connection=connection).key, job.id)
        pipe.execute()


def worker_count(connection) -> int:
    """The workers that are alive (:func:`workers`)."""
    return len(workers(connection))


def job_facts(connection, job_id: str, merge_id: str = "") -> JobFacts:
    """What :func:`service.supervision.refit_dead` needs to know of a refit's job (and of the job
    that merges its chain groups, if it fanned out), each job read once. A merge counts as
    ``merging`` once past its groups (no longer deferred) and alive: while it is deferred its
    groups beat for the refit; should one's worker die, RQ's cleanup fails it and queues the
    merge, which runs the missing chains itself."""
    merge = _fetch(connection, merge_id)
    merging = (
        merge is not None
        and merge.get_status(refresh=False) != JobStatus.DEFERRED
        and _alive(connection, merge)
    )
    job = _fetch(connection, job_id)
    if job is None:
        return JobFacts(alive=False, failed=False, exists=False, merging=merging)
    failed = job.get_status(refresh=False) in (
        JobStatus.FAILED,
        JobStatus.STOPPED,
        JobStatus.CANCELED,
    )
    return JobFacts(alive=_alive(connection, job), failed=failed, merging=merging)


def _fetch(connection, job_id: str) -> Job | None:
    if not job_id:
        return None
    try:
        return fetch_job(job_id, connection)
    except NoSuchJobError:
        return None


def job_alive(connection, job_id: str, silent_seconds: float = 30.0) -> bool:
    """Whether a job is waiting in its queue (or for its dependencies or its time), on its way
    to a worker's work horse, or running on a worker that sent a heartbeat in the last
    ``silent_seconds`` (a busy worker sends one every ``job_monitoring_interval``; a dead one's
    registration outlives it by a minute)."""
    job = _fetch(connection, job_id)
    return job is not None and _alive(connection, job, silent_seconds)


def _alive(connection, job: Job, silent_seconds: float = 30.0) -> bool:
    """:func:`job_alive` of a job read already."""
    job_id = job.id
    status = job.get_status(refresh=False)
    if status in (JobStatus.DEFERRED, JobStatus.SCHEDULED):
        return True
    if status == JobStatus.QUEUED:
        waiting = queue(job.origin, connection)
        if waiting.get_job_position(job_id) is not None:
            return True
        # A worker took it and its work horse has not started it yet: until then RQ keeps it on
        # the queue's intermediate list. One still there a minute after it was first seen there
        # was dropped mid-dequeue (RQ's own rule, whose marker RQ's cleanup shares).
        transit = waiting.intermediate_queue
        if job_id in transit.get_job_ids():
            transit.set_first_seen(job_id)
            return not transit.should_be_cleaned_up(job_id)
        # on neither: dropped, or taken and started by a worker since its status was read (a job
        # judged dead is enqueued again and its running refit superseded), so read it again
        try:
            job.refresh()
        except NoSuchJobError:
            return False
        status = job.get_status(refresh=False)
    if status == JobStatus.STARTED and job.worker_name:
        beat = connection.hget(f"rq:worker:{job.worker_name}", "last_heartbeat")
        if beat is None:
            return False
        age = datetime.now(UTC) - utcparse(beat.decode()).replace(tzinfo=UTC)
        return age.total_seconds() < silent_seconds
    return False
