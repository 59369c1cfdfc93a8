"""Refit supervision: the refit in charge of a campaign (its job id fences off every other's
writes), its heartbeat, its end, its failures and their back-off, the owner's retry; and the one
place that puts a refit on the queue (:meth:`Refits.enqueue_as`). A refit that died or never
reached the queue is revived by :mod:`service.store.revivals`."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from fbgp_al.service import costs, loop, queues
from fbgp_al.service.keys import PHASES
from fbgp_al.service.loop import Rules
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.settings import get_settings
from fbgp_al.service.store.campaigns import Campaigns
from fbgp_al.service.store.jobs import Jobs, Workforce
from fbgp_al.service.store.models import Models
from fbgp_al.service.store.noun import Noun
from fbgp_al.service.store.pollers import Pollers
from fbgp_al.service.store.runs import MAX_REASON
from fbgp_al.service.store.tickets import Tickets

log = logging.getLogger("fbgp.store")

# a refit whose job died (its history's error, and the campaign's if it failed so)
DIED = (
    "its job ended without a result (its work horse was killed, or ran out of time or "
    "memory, or its worker died)"
)


@dataclass
class RefitInputs:
    """What a refit reads as it starts (:meth:`Refits.inputs`): the spec, the labels (the
    refit's ``n``) and the latest model (for a warm start), of one instant, and, if asked, the
    workers (for its chains to take idle ones). The failed runs its failure model counts are
    read with the candidates, once the posterior is sampled
    (:meth:`service.store.models.Models.candidates`)."""

    spec: dict
    labels: list[dict]
    previous: dict | None
    workforce: Workforce | None = None
    n: int = field(init=False)

    def __post_init__(self):
        self.n = len(self.labels)


class Refits(Noun):
    """The refit in charge of a campaign: its enqueue, heartbeat, end and failures."""

    campaigns: Campaigns
    tickets: Tickets
    jobs: Jobs
    models: Models
    pollers: Pollers

    def requested(self, campaign_id: str, enqueue: bool, spec: dict | None = None) -> bool:
        """After a script stored something and said a refit is due (``enqueue``): put it on the
        queue (``spec``: the campaign's, if read). What was stored stays stored even if the
        refit cannot be enqueued now: the state says it is queued, and it is revived once Redis
        answers (logged, never raised). ``enqueue`` again, for the caller's answer."""
        if enqueue:
            try:
                self.enqueue(campaign_id, spec)
            except RedisError as error:
                log.warning(
                    "refit not enqueued (%s); it will be revived",
                    error,
                    extra={"campaign": campaign_id},
                )
        return enqueue

    def enqueue(self, campaign_id: str, spec: dict | None = None) -> str | None:
        """Put the campaign's queued refit (the state says ``queued`` already: a script
        requested it) on the queue under a new job, in charge from now; None if the campaign
        was deleted or failed meanwhile, or has no refit queued."""
        job_id = uuid.uuid4().hex
        return self.enqueue_as(campaign_id, job_id, time.time(), take_charge=True, spec=spec)

    def enqueue_as(
        self,
        campaign_id: str,
        job_id: str,
        now: float,
        take_charge: bool = False,
        spec: dict | None = None,
    ) -> str | None:
        """The one place a refit goes on the queue: job ``job_id``, noted among the campaign's
        jobs first (``enqueue.lua`` puts it in charge of the queued refit as well, with
        ``take_charge``; else a script has put it in charge already), so that the job finds
        itself in charge when it starts; nothing is enqueued if that fails (None)."""
        try:
            spec = self.campaigns.spec(campaign_id) if spec is None else spec
        except NotFound:
            return None
        timeout, long = self._refit_job(campaign_id, spec)
        member = f"refit:{job_id}"
        if take_charge:
            keys = [self.k(campaign_id, p) for p in ("spec", "state", "jobs")]
            noted = self.s.enqueue(keys=keys, args=[job_id, member, now + timeout, now])
        else:
            noted = self.jobs.track(campaign_id, [member], now, now + timeout)
        if not noted:
            return None
        queues.enqueue_refit(self.r, campaign_id, job_id, timeout, spec, long)
        return job_id

    def _refit_job(self, campaign_id: str, spec: dict) -> tuple[int, bool]:
        """A refit job's timeout and whether it is long (:func:`service.costs.refit_job`)."""
        settings = get_settings()
        pipe = self.r.pipeline(transaction=False)
        pipe.llen(self.k(campaign_id, "labels"))
        pipe.hmget(
            self.k(campaign_id, "state"),
            "last_refit_seconds",
            "failed_refit_seconds",
            "model_version",
        )
        n, (*took, version) = pipe.execute()
        known = [float(t) for t in took if t and float(t) > 0]
        last_seconds = max(known) if known else None
        # the time is scaled from the last model's labels to the labels now (a failed refit's
        # ran on at least as many: scaled from the model's, it errs towards the long lane)
        last_n = int(version) if version else None
        return costs.refit_job(spec, n, last_seconds, settings, last_n)

    def failure_args(
        self, campaign_id: str, job_id: str, now: float, cause: str, died: bool
    ) -> tuple[list[str], str] | None:
        """``after_failure.lua``'s keys and its ``p`` (as JSON) for a refit that failed of
        ``cause`` (``died``: its job died), the next one to run as ``job_id``; None if the
        campaign is gone."""
        try:
            spec = self.campaigns.spec(campaign_id)
        except NotFound:
            return None
        settings = get_settings()
        reason = (
            f"the refit failed {settings.refit_max_attempts} times in a row; the last time: {cause}"
        )
        keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
        keys.append(self.k(campaign_id, "history"))
        params = json.dumps(
            {
                "job": job_id,
                "now": now,
                "attempts": settings.refit_max_attempts,
                "base": settings.refit_backoff_seconds,
                "cap": settings.refit_backoff_max_seconds,
                "died": died,
                "reason": reason[:MAX_REASON],
                "design_size": spec["initial_design"]["size"],
                "max_labels": spec["max_labels"],
                "keep": settings.keep_history,
            }
        )
        return keys, params

    def after_failure(
        self, campaign_id: str, outcome: int, job_id: str, now: float, but: str | None = None
    ) -> None:
        """Act on ``after_failure.lua``'s outcome: enqueue the new job (1), or stop the campaign's
        other refit jobs once it failed (3)."""
        if outcome == 1:
            self.enqueue_as(campaign_id, job_id, now)
        elif outcome == 3:
            log.error(
                "campaign failed: %s",
                self.campaigns.state(campaign_id).get("failed"),
                extra={"campaign": campaign_id},
            )
            self.jobs.stop_refits(campaign_id, but)
        self.pollers.wake(campaign_id)

    def note_merge(self, campaign_id: str, token: str, merge_id: str) -> bool:
        """Note ``merge_id`` as the job that merges refit ``token``'s chain groups (while it waits
        or runs, the silent refit is alive); False when another refit is in charge."""
        keys = [self.k(campaign_id, "state")]
        return bool(self.s.note_merge(keys=keys, args=[token, merge_id]))

    def retry(self, campaign_id: str, now: float, forget_failures: bool = False) -> bool:
        """The owner's retry (``retry.lua``): a failed campaign's failed state cleared;
        a failing or stalled one's failed runs forgiven, their points offered again; then a
        refit enqueued where one is due. ``forget_failures`` (the simulator changed): the
        failure model forgets the runs failed until now as well (any campaign with a failed
        run may be told so). False if there was nothing to retry."""
        spec = self.campaigns.spec(campaign_id)
        rules = Rules.of(spec)
        job_id = uuid.uuid4().hex
        stalled = loop.stalled(rules, self.tickets.snapshot(campaign_id, now, False))
        keys = [self.k(campaign_id, p) for p in ("state", "labels")] + [PHASES]
        keys += [self.k(campaign_id, p) for p in ("failed", "failures")]
        args = [
            job_id,
            now,
            spec["initial_design"]["size"],
            spec["max_labels"],
            rules.failure_limit,
            "1" if stalled else "0",
            "1" if forget_failures else "0",
        ]
        outcome = self.s.retry(keys=keys, args=args)
        if outcome == 2:
            self.enqueue_as(campaign_id, job_id, now)
        self.pollers.wake(campaign_id)
        return bool(outcome)

    def beat(self, campaign_id: str, token: str, now: float, start: bool = False) -> bool:
        """The heartbeat of refit ``token`` (``start``: it begins now); False when another
        refit is in charge."""
        keys = [self.k(campaign_id, "state")]
        return bool(self.s.beat(keys=keys, args=[token, now, "1" if start else "0"]))

    def inputs(
        self, campaign_id: str, token: str, now: float, start: bool = False, workforce: bool = False
    ) -> RefitInputs | None:
        """Refit ``token``'s beat (``start``: it begins now) and, if it is in charge, what it
        reads, in one round trip (:class:`RefitInputs`), and with ``workforce`` the workers
        (:meth:`service.store.jobs.Jobs.workforce`); None if another refit is in charge or the
        campaign was deleted."""
        if not self.beat(campaign_id, token, now, start=start):
            return None
        pipe = self.r.pipeline(transaction=True)
        pipe.get(self.k(campaign_id, "spec"))
        pipe.lrange(self.k(campaign_id, "labels"), 0, -1)
        pipe.get(self.k(campaign_id, "model"))
        spec, labels, model = pipe.execute()
        if spec is None:
            return None
        return RefitInputs(
            json.loads(spec),
            [json.loads(v) for v in labels],
            None if model is None else json.loads(model),
            self.jobs.workforce(now) if workforce else None,
        )

    def fail(
        self, campaign_id: str, message: str, n_seen: int, token: str, current: str | None = None
    ) -> bool:
        """Record why refit ``token`` failed (if it is in charge; False if not); the model
        stays. The refit runs again after a back-off (:func:`service.store.rules.backoff`;
        sooner when new data comes), and at ``refit_max_attempts`` failures in a row the
        campaign fails."""
        now = time.time()
        event = {"event": "refit_failed", "n_labeled": n_seen, "at": now, "error": message[:2000]}
        job_id = uuid.uuid4().hex
        failure = self.failure_args(campaign_id, job_id, now, message, died=False)
        if failure is None:
            return False  # deleted meanwhile
        keys, params = failure
        args = [token, message[:2000], json.dumps(event), params]
        outcome = self.s.fail_refit(keys=keys, args=args)
        if outcome:  # the job reporting (``current``) is not stopped: it ends by itself
            self.after_failure(campaign_id, outcome, job_id, now, but=current or token)
        else:
            self.pollers.wake(campaign_id)
        return bool(outcome)

    def end(
        self, campaign_id: str, n_seen: int, now: float, token: str, enqueue: bool = True
    ) -> bool:
        """The end of refit ``token`` on ``n_seen`` labels; True when another refit must run
        (labels came in meanwhile), which is enqueued (``enqueue=False``: left queued)."""
        keys = [self.k(campaign_id, "state"), self.k(campaign_id, "labels")]
        again = bool(self.s.end_refit(keys=keys, args=[n_seen, now, token]))
        self.pollers.wake(campaign_id)
        return self.requested(campaign_id, again) if enqueue else again

    def finish(
        self,
        campaign_id: str,
        model: dict,
        ranking: list[dict],
        token: str,
        n_seen: int,
        now: float,
    ) -> bool:
        """The end of refit ``token`` on ``n_seen`` labels: its model and ranking stored
        (:meth:`service.store.models.Models.save`: True if they were) and the refit ended
        (:meth:`end`), the next enqueued if labels came meanwhile."""
        stored = self.models.save(campaign_id, model, ranking, token)
        self.end(campaign_id, n_seen, now, token)
        return stored
