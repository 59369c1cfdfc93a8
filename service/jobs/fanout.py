"""A refit's work fanned out over idle workers: its chains as one job per group of chains and a
merge job that depends on them all (RQ ``depends_on``), and its scoring as parts of the
candidates that idle workers take while the refit scores its own part (:func:`scoring_parts`,
:func:`scored_in_parts`). What the parts of a refit write and read in the store (the chain
groups' draws, a scoring's parts) the jobs of :mod:`service.jobs` write and read; this module
says what to write and what it means (:class:`Peers`).
The jobs are :func:`service.jobs.refit_chains`, :func:`service.jobs.refit_merge` and
:func:`service.jobs.score_part`, enqueued by dotted name."""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from collections.abc import Callable

import numpy as np
import torch
from rq import Queue, get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Dependency, Job, JobStatus

from fbgp_al.service import job_results, queues
from fbgp_al.service.job_results import REFIT_RESULT_TTL
from fbgp_al.service.queues import REFIT, ordinary
from fbgp_al.service.store.jobs import Workforce
from fbgp_al.worker.gp import SCORE_ALIGN
from fbgp_al.worker.nuts import Draws
from fbgp_al.worker.scoring import Scoring, pack, unpack


def chain_groups(chains: int, workers: int) -> list[list[int]]:
    """Chains ``0..chains-1`` split into one contiguous group per worker (at most one per
    chain). A chain's draws depend on its seed and number, and on its group only through the
    rounding of batched linear algebra."""
    k = max(1, min(chains, workers))
    return [g.tolist() for g in np.array_split(np.arange(chains), k)]


def lane() -> str:
    """The queue of the running refit (:func:`service.queues.refit_queue`): its chain groups
    and merge go there too, so that they run only on workers that serve it."""
    job = get_current_job()
    return job.origin if job is not None and job.origin else REFIT


def chain_lane(own: str, previous: dict | None, n: int, chains: int, short_seconds: float) -> str:
    """The queue of a refit's chain groups: the refit's own (``own``, :func:`lane`), or, for a
    refit of the long lane whose groups would be short, the ordinary lane of its tenant
    (:func:`service.queues.ordinary`), which light workers serve too. Short: the ``previous``
    model's sampling seconds per chain (its wall time times its chain groups, over its chains),
    scaled by its labels' cube to ``n``, times the larger group of two (``ceil(chains / 2)``),
    at most ``short_seconds`` (``long_refit_seconds``), so that a small campaign's refit waits
    behind one group at most about as long as behind an ordinary refit. With no previous
    sampling to judge by, the refit's own."""
    if own == ordinary(own) or not previous:
        return own
    d = previous.get("diagnostics") or {}
    seconds, had = d.get("seconds"), previous.get("n_labeled")
    if not seconds or not had or not d.get("chains"):
        return own
    # a fanned-out refit's seconds are its wall time, its groups running side by side
    spent = float(seconds) * int(d.get("chain_groups") or 1)
    per_chain = spent / int(d["chains"]) * max(1.0, (n / int(had)) ** 3)
    return ordinary(own) if per_chain * math.ceil(chains / 2) <= short_seconds else own


def free_workers(workforce: Workforce, campaign_id: str, queue: str | None = None) -> int:
    """How many workers this refit's chains may take, of the ``workforce`` read with its inputs
    or candidates (:meth:`service.store.jobs.Jobs.workforce`): this one and those serving its
    queue (:func:`lane`, or ``queue``) that would idle (idle ones less the jobs queued, so that
    no chain group goes ahead of another campaign's waiting refit), and no more than the
    campaign's fair share of those workers among the campaigns that want one, so that a
    campaign whose simulators are out still finds a worker when their labels come."""
    job = get_current_job()
    me = job.worker_name if job else None
    queue = queue or lane()
    serving = [hand for hand in workforce.hands if queue in hand.queues]
    idle = sum(1 for hand in serving if hand.name != me and hand.state == "idle")
    free = 1 + max(0, idle - workforce.waiting)
    if free == 1:
        return 1
    sharing = len(workforce.wanting | {campaign_id})  # read: more idle than waiting
    return max(1, min(free, len(serving) // sharing))


def dispatch(
    connection,
    campaign_id: str,
    n: int,
    groups: list[list[int]],
    warm: dict | None,
    token: str,
    began: float,
    timeout: int = 3600,
    chains_queue: str | None = None,
    job_ids: list[str] | None = None,
) -> str:
    """Enqueue one job per group of chains and the merge after them; the merge's job id. The
    groups queue behind whatever was queued since the workers were counted, on
    ``chains_queue`` (:func:`chain_lane`; default the refit's own queue, :func:`lane`), the
    merge on the refit's own. ``job_ids``: the groups' and the merge's (:func:`new_ids`,
    noted beforehand for a delete to stop), or new ones."""
    queue = queues.queue(lane(), connection)
    groups_queue = (
        queue if chains_queue in (None, lane()) else queues.queue(chains_queue, connection)
    )
    job_ids = job_ids or new_ids(groups)
    jobs = [
        groups_queue.enqueue_call(
            "fbgp_al.service.jobs.refit_chains",
            args=(campaign_id, n, ids, warm, token),
            timeout=timeout,
            result_ttl=3600,
            failure_ttl=86400,
            job_id=job_id,
        )
        for ids, job_id in zip(groups, job_ids, strict=False)
    ]
    # the merge runs even if a group failed: it then runs the missing chains itself
    after = Dependency(jobs=jobs, allow_failure=True)
    merge = queue.enqueue_call(
        "fbgp_al.service.jobs.refit_merge",
        args=(campaign_id, n, [j.id for j in jobs], token, began),
        depends_on=after,
        timeout=timeout,
        result_ttl=REFIT_RESULT_TTL,
        failure_ttl=86400,
        job_id=job_ids[-1],
    )
    return merge.id


def new_ids(groups: list[list[int]]) -> list[str]:
    """Job ids for ``groups``' jobs and, last, their merge's (:func:`dispatch`)."""
    return [uuid.uuid4().hex for _ in range(len(groups) + 1)]


def merged(connection, job_ids: list[str]) -> tuple[Draws, str, dict | None] | None:
    """The groups' draws together, ``"warm"`` if every group started warm (else ``"cold"``),
    and ``{}`` if they were given a warm start (else None); None if a group is missing (it
    failed, or its worker died). The groups' results expire once read
    (:func:`service.job_results.forget`)."""
    results = []
    for job_id in job_ids:
        with contextlib.suppress(NoSuchJobError):
            results.append(queues.fetch_job(job_id, connection).return_value())
    job_results.forget(connection, job_ids)
    if len(results) < len(job_ids) or any(r is None for r in results):
        return None
    draws = Draws.concatenate([Draws.from_dict(r["draws"]) for r in results])
    how = "warm" if all(r["how"] == "warm" for r in results) else "cold"
    return draws, how, {} if results[0]["warm"] else None


PEERS_TTL = 3600  # seconds the groups' notes of a refit are kept (the merge deletes them)
PEERS_STALE = 300.0  # a group silent this long counts as stopped (its worker may have died)
PEERS_POLL = 0.1  # seconds between looks of a group that waits for the others to catch up
# a group that reached its first check waits this long, or twice as long as it took to get
# there, for every other group to say something; a group still queued after that (no worker
# took it) ends the fan-out, and the merge runs every chain itself
PEERS_PATIENCE = 30.0


class PeersLost(RuntimeError):
    """A chain group could not judge the target on all the chains: another group stopped short
    of this check, went silent, or never started. The merge then runs every chain itself."""


class Peers:
    """Where the chain groups of one refit (``token``) are, as this group (``chain_ids``) reads
    their notes: each group's note (the shape of its latest draws, whether it has stopped, and
    when it last said so) in one hash, and its latest draws (``C x S x P``, float64) in another
    (:class:`service.store.groups.Groups`). Its job (:func:`service.jobs.refit_chains`) reads
    and writes them; this object says what to write and what the notes read mean.

    At each check of its sampling (:func:`worker.fitting.grouped`) the job publishes this
    group's draws (:meth:`note`) and waits until every other group has published as many
    (:meth:`together`), then sends them to the sampling, which judges the target on all the
    chains in chain order. Every group so takes the same decision at the same check, the one a
    single process running every chain takes: the merged draws are those of one process, bit
    for bit, whatever the number of groups and whenever each runs."""

    def __init__(
        self,
        token: str,
        chain_ids: list[int],
        chains: int,
        stale: float = PEERS_STALE,
        poll: float = PEERS_POLL,
        patience: float = PEERS_PATIENCE,
    ):
        self.token = token
        self.me = str(chain_ids[0])
        self.mine = len(chain_ids)
        self.chains = chains
        self.stale = stale
        self.poll = poll
        self.patience = patience
        self.started = time.monotonic()
        self.waited = self.started
        self._meta: dict = {}

    def note(self, theta: np.ndarray, stopped: bool) -> tuple[str, bytes]:
        """This group's note and draws to publish: ``theta``, ``stopped`` or not; a wait for
        the others (:meth:`together`) starts now."""
        self._meta = {"shape": list(theta.shape), "stopped": stopped, "at": time.time()}
        self.waited = time.monotonic()
        return json.dumps(self._meta), np.ascontiguousarray(theta, dtype=np.float64).tobytes()

    def again(self) -> str | None:
        """This group's note again, as it stands now, once a tenth of ``stale`` has passed
        since it last said it (so that a wait for slower groups is not taken for a dead worker);
        None if it is not due (or nothing was published)."""
        if not self._meta or time.time() - self._meta["at"] <= self.stale / 10:
            return None
        self._meta["at"] = time.time()
        return json.dumps(self._meta)

    def abandoned(self) -> str | None:
        """The note that says this group has stopped (its sampling failed), so that no other
        group waits for it; None if it never published. The merge then runs the missing
        chains itself."""
        if not self._meta:
            return None
        self._meta.update(stopped=True, at=time.time())
        return json.dumps(self._meta)

    def notes(self, raw: dict[bytes, bytes]) -> dict[str, dict]:
        """The other groups' notes, by name, from ``raw`` (the hash of notes)."""
        return {
            name.decode(): json.loads(note)
            for name, note in raw.items()
            if name.decode() != self.me
        }

    def _stopped(self, note: dict, now: float) -> bool:
        return bool(note["stopped"]) or now - note["at"] > self.stale

    def moved(self, seen: dict[bytes, bytes], raw: dict[bytes, bytes]) -> bool:
        """Whether another group has said something new since its notes were ``seen``, or
        counts as stopped (``raw``: the notes read now)."""
        notes, now = self.notes(raw), time.time()
        return notes != self.notes(seen) or any(self._stopped(n, now) for n in notes.values())

    def patient(self) -> float:
        """How long (seconds) this group waits at a check for every other group to say
        something: the patience (see ``PEERS_PATIENCE``), or twice as long as it took to get
        to its first check."""
        return max(self.patience, 2 * (self.waited - self.started))

    def until(self) -> float:
        """When (``time.monotonic()``) a wait for the others ends at the latest, to look at
        their draws again (:meth:`together` then says whether the patience is out)."""
        return self.waited + self.patient() + self.poll

    def together(
        self, theta: np.ndarray, raw: dict[bytes, bytes], draws: dict[bytes, bytes]
    ) -> np.ndarray | None:
        """Every chain's first ``S`` draws (``theta``, this group's ``C x S x P``, published),
        in chain order, if every other group has published at least ``S`` (``raw``: the notes,
        ``draws``: their draws, read together); None while not. Raises :class:`PeersLost` if
        a group stopped or went silent short of them, or if not every group has said anything
        within the patience (:meth:`patient`) since this check's draws were published."""
        have = theta.shape[1]
        notes, now = self.notes(raw), time.time()
        heard = self.mine + sum(note["shape"][0] for note in notes.values())
        short = [note for note in notes.values() if note["shape"][1] < have]
        if heard == self.chains and not short:
            parts = {int(self.me): theta}
            for name, note in notes.items():
                rows = np.frombuffer(draws[name.encode()], dtype=np.float64)
                parts[int(name)] = rows.reshape(note["shape"])[:, :have]
            return np.concatenate([parts[first] for first in sorted(parts)])
        if any(self._stopped(note, now) for note in short):
            raise PeersLost(f"a chain group stopped short of {have} draws")
        patience = self.patient()
        if heard < self.chains and time.monotonic() - self.waited > patience:
            raise PeersLost(f"not every chain group started within {patience:.0f} s")
        return None


def group_result(draws: Draws, how: str, warm: dict | None) -> dict:
    """What a group's job returns, for :func:`merged`: plain JSON, its draws as lists of numbers
    (which JSON carries exactly: a float is written as the shortest text that reads back as
    the same double)."""
    return {"draws": draws.to_dict(), "how": how, "warm": warm is not None}


# Scoring in parts: only when the part is worth a job (candidates x draws x n^2 multiply-adds
# of the predictive variances, about 0.1 s of scoring here), and a part that a worker took is
# awaited for at most SHARE_PATIENCE times as long as this refit's own part took (its worker may
# have died), then scored here. What the parts score is kept in Redis for at most their timeout
# and SHARE_KEEP seconds more (the refit deletes it once it has every part's scores). The refit
# job reads and writes it (:func:`service.jobs._share`).
SHARE_MIN_WORK = 2e9
SHARE_MIN_CANDIDATES = 500
SHARE_PATIENCE = 5.0
SHARE_POLL = 0.01
SHARE_KEEP = 60


def may_share(m: int, work_per_candidate: float) -> bool:
    """Whether a scoring of ``m`` candidates may be split in parts: their work is worth a job
    (:data:`SHARE_MIN_WORK`) and they fill more than one part (:data:`worker.gp.SCORE_ALIGN`)."""
    return m * work_per_candidate >= SHARE_MIN_WORK and m > SCORE_ALIGN


def scoring_parts(
    m: int, work_per_candidate: float, workforce: Workforce | None, campaign_id: str, queue: str
) -> list[np.ndarray] | None:
    """How a refit scores ``m`` candidates: None, all of them in the job, unless the parts are
    worth a job each (:data:`SHARE_MIN_WORK`, :data:`SHARE_MIN_CANDIDATES`); else one part for
    the job and one for each worker of ``queue`` (the refit's tenant's ordinary queue,
    :func:`service.queues.ordinary`: light workers serve it too) that is idle in ``workforce``
    (read with the candidates, as :func:`free_workers` counts them), each starting where one
    job's chunks would (:func:`aligned_parts`), so that the scores are those of one job, bit for
    bit, in the same order (each candidate's score depends on it alone). None too without a
    ``workforce`` (not read: no scoring of the refit's may be split, :func:`may_share`)."""
    if workforce is None or not may_share(m, work_per_candidate):
        return None
    free = free_workers(workforce, campaign_id, queue)
    parts = min(free, m // SHARE_MIN_CANDIDATES, -(-m // SCORE_ALIGN))
    return aligned_parts(m, parts) if parts > 1 else None


def kept_parts(candidates: torch.Tensor, pieces: list[np.ndarray]) -> dict[str, str]:
    """What is kept for the parts' jobs (:meth:`service.store.groups.Groups.keep_scoring`):
    each other part's candidates, packed, under ``candidates:<start>``."""
    return {f"candidates:{int(p[0])}": json.dumps(pack(candidates[p])) for p in pieces[1:]}


def scored_in_parts(
    connection,
    queue_name: str,
    key: str,
    fn: Scoring,
    candidates: torch.Tensor,
    pieces: list[np.ndarray],
    timeout: int,
) -> torch.Tensor:
    """``fn``'s scores of ``candidates`` in ``pieces`` (:func:`scoring_parts`), each but the
    first a :func:`service.jobs.score_part` job at the front of queue ``queue_name``, given the
    key under which the scoring and the parts' candidates are kept (:func:`kept_parts`) and
    where its part starts. This job scores the first part meanwhile, then takes each other
    part's result, or scores that part itself if no worker has taken it yet (it is taken off
    the queue first: never scored twice over), if its job failed, or if it is overdue."""
    queue = queues.queue(queue_name, connection)
    jobs = [
        queue.enqueue_call(
            "fbgp_al.service.jobs.score_part",
            args=(key, int(p[0])),
            timeout=timeout,
            result_ttl=SHARE_KEEP,
            failure_ttl=3600,
            at_front=True,
        )
        for p in pieces[1:]
    ]
    started = time.perf_counter()
    scores = [fn(candidates[pieces[0]])]
    patience = SHARE_PATIENCE * (time.perf_counter() - started) + 1.0
    for job, piece in zip(jobs, pieces[1:], strict=True):
        scores.append(_part(queue, job, patience, lambda p=piece: fn(candidates[p])))
    return torch.cat(scores)


def part_scores(key: str, start: int, scoring: bytes | None, part: bytes | None) -> dict:
    """The scores of the part of a shared scoring that starts at candidate ``start``, of
    ``scoring`` and ``part`` as kept under ``key``
    (:meth:`service.store.groups.Groups.scoring_part`), as :func:`worker.scoring.pack` gives
    them. LookupError if they are gone (the refit has its scores already, or they expired)."""
    if scoring is None or part is None:
        raise LookupError(f"no part at {start} of scoring {key!r}: its refit is done with it")
    fn = Scoring.from_plain(json.loads(scoring))
    return pack(fn(torch.from_numpy(unpack(json.loads(part)))))


def aligned_parts(m: int, parts: int) -> list[np.ndarray]:
    """``0..m-1`` in at most ``parts`` consecutive parts of about equal size, each starting at a
    multiple of :data:`worker.gp.SCORE_ALIGN`, so that a part's chunks are the chunks one job
    scoring them all would make (and its scores the same bits)."""
    blocks = -(-m // SCORE_ALIGN)
    cuts = sorted({min(m, SCORE_ALIGN * round(blocks * i / parts)) for i in range(parts + 1)})
    return [np.arange(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _part(queue: Queue, job: Job, patience: float, here: Callable[[], torch.Tensor]):
    """A part's scores: its job's result once it is done, else scored ``here``."""
    if queue.remove(job):  # no worker took it: it will not run
        job.delete()
        return here()
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        status = job.get_status(refresh=True)
        if status == JobStatus.FINISHED:
            value = job.return_value(refresh=True)
            job_results.forget(queue.connection, [job.id])
            if isinstance(value, dict):
                return torch.from_numpy(unpack(value))
            break
        if status not in (JobStatus.STARTED, JobStatus.QUEUED):
            break  # failed, stopped, or gone
        time.sleep(SHARE_POLL)
    return here()
