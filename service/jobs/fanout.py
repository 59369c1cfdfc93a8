"""A refit's work fanned out over idle workers: its chains as one job per group of chains and a
merge job that depends on them all (RQ ``depends_on``), and its scoring as parts of the
candidates that idle workers take while the refit scores its own part (:func:`share_scoring`).
The jobs are :func:`service.jobs.refit_chains`, :func:`service.jobs.refit_merge` and
:func:`service.jobs.score_part`, enqueued by dotted name."""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch
from rq import Queue, get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Dependency, Job, JobStatus

from fbgp_al.service import job_results, queues
from fbgp_al.service.job_results import REFIT_RESULT_TTL
from fbgp_al.service.queues import REFIT, ordinary
from fbgp_al.service.store.groups import Groups
from fbgp_al.worker.fitting import Steps
from fbgp_al.worker.gp import SCORE_ALIGN
from fbgp_al.worker.nuts import Draws
from fbgp_al.worker.scoring import Scoring, pack, unpack

T = TypeVar("T")


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


def free_workers(store, campaign_id: str, now: float, queue: str | None = None) -> int:
    """How many workers this refit's chains may take: this one and those serving its queue
    (:func:`lane`, or ``queue``) that would idle (idle ones less the jobs queued, so that no
    chain group goes ahead of another campaign's waiting refit), and no more than the
    campaign's fair share of those workers among the campaigns that want one
    (:meth:`service.store.jobs.Jobs.wanting_workers`), so that a campaign whose simulators
    are out still finds a worker when their labels come."""
    connection = store.r
    job = get_current_job()
    me = job.worker_name if job else None
    queue = queue or lane()
    workers, waiting = queues.lane_load(connection, queue)
    idle = sum(1 for w in workers if w.name != me and w.get_state() == "idle")
    free = 1 + max(0, idle - waiting)
    if free == 1:
        return 1
    sharing = len(store.jobs.wanting_workers(now) | {campaign_id})
    return max(1, min(free, len(workers) // sharing))


def dispatch(
    connection,
    campaign_id: str,
    n: int,
    groups: list[list[int]],
    warm: dict | None,
    token: str,
    began: float,
    timeout: int = 3600,
    track: Callable[[list[str]], bool] | None = None,
    chains_queue: str | None = None,
) -> str | None:
    """Enqueue one job per group of chains and the merge after them; the merge's job id. The
    groups queue behind whatever was queued since the workers were counted, on
    ``chains_queue`` (:func:`chain_lane`; default the refit's own queue, :func:`lane`), the
    merge on the refit's own."""
    queue = queues.queue(lane(), connection)
    groups_queue = (
        queue if chains_queue in (None, lane()) else queues.queue(chains_queue, connection)
    )
    # their ids are noted first (``track``: False if the campaign is gone), for a delete to stop
    job_ids = [uuid.uuid4().hex for _ in range(len(groups) + 1)]
    if track is not None and not track(job_ids):
        return None
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
    """The chain groups of one refit (``token``) telling each other where they are, in Redis:
    each group's note (the shape of its latest draws, whether it has stopped, and when it last
    said so) in one hash, and its latest draws (``C x S x P``, float64) in another.

    :func:`worker.fitting.chains` publishes this group's draws at each of the sampler's checks and
    waits (:meth:`together`) until every other group has published as many, then judges the
    target on all the chains in chain order. Every group so takes the same decision at the same
    check, the one a single process running every chain takes: the merged draws are those of
    one process, bit for bit, whatever the number of groups and whenever each runs."""

    def __init__(
        self,
        groups: Groups,
        token: str,
        chain_ids: list[int],
        chains: int,
        stale: float = PEERS_STALE,
        poll: float = PEERS_POLL,
        patience: float = PEERS_PATIENCE,
    ):
        self.groups = groups
        self.token = token
        self.me = str(chain_ids[0])
        self.mine = len(chain_ids)
        self.chains = chains
        self.stale = stale
        self.poll = poll
        self.patience = patience
        self.started = time.monotonic()
        self._meta: dict = {}

    def publish(self, theta: np.ndarray, stopped: bool) -> None:
        self._meta = {"shape": list(theta.shape), "stopped": stopped, "at": time.time()}
        data = np.ascontiguousarray(theta, dtype=np.float64).tobytes()
        self.groups.publish(self.token, self.me, json.dumps(self._meta), data, PEERS_TTL)

    def _say(self) -> None:
        """This group's note again, as it stands now."""
        self._meta["at"] = time.time()
        self.groups.say(self.token, self.me, json.dumps(self._meta))

    def abandon(self) -> None:
        """Say that this group has stopped (its sampling failed), so that no other group waits
        for it; the merge then runs the missing chains itself."""
        if self._meta:
            self._meta["stopped"] = True
            self._say()

    def _notes(self, raw: dict | None = None) -> dict[str, dict]:
        """The other groups' notes, by name (from ``raw``, the hash of notes, if read)."""
        raw = self.groups.notes(self.token) if raw is None else raw
        return {
            name.decode(): json.loads(note)
            for name, note in raw.items()
            if name.decode() != self.me
        }

    def _stopped(self, note: dict, now: float) -> bool:
        return bool(note["stopped"]) or now - note["at"] > self.stale

    def wait(self, until: float = math.inf) -> None:
        """Sleep until another group says something new or counts as stopped, or until
        ``until`` (``time.monotonic()``), looking at their notes alone (not their draws) every
        ``poll`` seconds; every tenth of ``stale``, say again that this group is there (so that
        a wait for slower groups is not taken for a dead worker)."""
        seen = self._notes()
        while time.monotonic() < until:
            time.sleep(self.poll)
            if self._meta and time.time() - self._meta["at"] > self.stale / 10:
                self._say()
            notes, now = self._notes(), time.time()
            if notes != seen or any(self._stopped(n, now) for n in notes.values()):
                return

    def together(self, theta: np.ndarray) -> np.ndarray:
        """Every chain's first ``S`` draws (``theta``, this group's ``C x S x P``, published),
        in chain order, once every other group has published at least ``S``. Raises
        :class:`PeersLost` if a group stopped or went silent short of them, or if not every
        group has said anything within the patience (see ``PEERS_PATIENCE``)."""
        have = theta.shape[1]
        patience = max(self.patience, 2 * (time.monotonic() - self.started))
        waited = time.monotonic()
        while True:
            raw, draws = self.groups.notes_and_draws(self.token)  # each note matches its draws
            notes, now = self._notes(raw), time.time()
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
            if heard < self.chains and time.monotonic() - waited > patience:
                raise PeersLost(f"not every chain group started within {patience:.0f} s")
            self.wait(waited + patience + self.poll)


def group_result(draws: Draws, how: str, warm: dict | None) -> dict:
    """What a group's job returns, for :func:`merged`: plain JSON, its draws as lists of numbers
    (which JSON carries exactly: a float is written as the shortest text that reads back as
    the same double)."""
    return {"draws": draws.to_dict(), "how": how, "warm": warm is not None}


# Scoring in parts: only when the part is worth a job (candidates x draws x n^2 multiply-adds
# of the predictive variances, about 0.1 s of scoring here), and a part that a worker took is
# awaited for at most SHARE_PATIENCE times as long as this refit's own part took (its worker may
# have died), then scored here. What the parts score is kept in Redis for at most their timeout
# and SHARE_KEEP seconds more (the refit deletes it once it has every part's scores).
SHARE_MIN_WORK = 2e9
SHARE_MIN_CANDIDATES = 500
SHARE_PATIENCE = 5.0
SHARE_POLL = 0.01
SHARE_KEEP = 60


def share_scoring(store, campaign_id: str, work_per_candidate: float, timeout: int):
    """How a refit job scores (:func:`driven`): the candidates split into one part
    for this job and one for each worker of the refit's tenant's ordinary queue
    (:func:`service.queues.ordinary`: light workers serve it too) that is idle now (as
    :func:`free_workers` counts them), each part a :func:`service.jobs.score_part` job at the
    front of that queue. The jobs' arguments are plain: the key under which the scoring
    (:class:`worker.scoring.Scoring`, as JSON) and each part's candidates are kept
    (:func:`service.keys.scoring`), and where the part starts. This job scores its own part
    meanwhile, then takes each other part's result, or scores that part itself if no worker
    has taken it yet (it is taken off the queue first: never scored twice over), if its job
    failed, or if it is overdue. Each candidate's score depends on it alone, and the parts
    start where one job's chunks would (:func:`aligned_parts`), so the scores are those of one
    job, bit for bit, in the same order."""
    connection = store.r

    def share(fn: Scoring, candidates: torch.Tensor) -> torch.Tensor:
        m = len(candidates)
        if m * work_per_candidate < SHARE_MIN_WORK:
            return fn(candidates)
        name = ordinary(lane())  # a long refit's parts are no longer than an ordinary refit
        free = free_workers(store, campaign_id, time.time(), name)
        parts = min(free, m // SHARE_MIN_CANDIDATES, -(-m // SCORE_ALIGN))
        if parts <= 1:
            return fn(candidates)
        pieces = aligned_parts(m, parts)
        queue = queues.queue(name, connection)
        kept = {f"candidates:{int(p[0])}": json.dumps(pack(candidates[p])) for p in pieces[1:]}
        key = store.groups.keep_scoring(json.dumps(fn.to_plain()), kept, timeout + SHARE_KEEP)
        try:
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
        finally:
            store.groups.forget_scoring(key)
        return torch.cat(scores)

    return share


def driven(steps: Steps[T], share: Callable[[Scoring, torch.Tensor], torch.Tensor]) -> T:
    """A ranking's result (:func:`worker.fitting.ranked`), its steps driven from the refit job:
    each scoring (:class:`worker.fitting.ToScore`) through ``share`` (:func:`share_scoring`'s,
    which may score its parts on idle workers), its scores sent back to the ranking. The math
    so calls nothing of the jobs: the job calls it, and it answers with what it needs."""
    try:
        step = next(steps)
        while True:
            step = steps.send(share(step.fn, step.candidates))
    except StopIteration as done:
        return done.value


def score_part(groups: Groups, key: str, start: int) -> dict:
    """The scores of the part of a shared scoring that starts at candidate ``start``
    (:func:`share_scoring`), from what is kept under ``key``, as :func:`worker.scoring.pack`
    gives them. LookupError if that is gone (the refit has its scores already, or it
    expired)."""
    scoring, part = groups.scoring_part(key, start)
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
