"""The rule of a refit's life, a pure function of the campaign's refit state and RQ's facts
about its job: whether a failed refit's back-off ran out, whether a queued one never reached
RQ, whether one in charge is dead (:func:`refit_condition`, the one decision that ``/next`` and
the workers' maintenance act on, through :meth:`service.store.revivals.Revivals.revive`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from fbgp_al.service.loop import Refit, RefitPhase

# a queued refit is given this long for its enqueue (after the label's script) to arrive
ENQUEUE_GRACE_SECONDS = 2.0
# a running refit whose heartbeat has been silent this long is dead if its job failed
SILENT_SECONDS = 3.0


def retry_due(refit: Refit, now: float) -> bool:
    """Whether a failed refit's back-off has run out (it is queued then)."""
    return refit.phase == RefitPhase.IDLE and not refit.failed and 0 < refit.retry_at <= now


@dataclass(frozen=True)
class JobFacts:
    """What RQ says about a refit's job (:func:`service.queues.job_facts`)."""

    alive: bool  # waiting in its queue, on its way to a work horse, or on a beating worker
    failed: bool  # ended without success
    exists: bool = True  # RQ knows it (False: its id was written, but it was never enqueued)
    # a fanned-out refit's chain groups are done and their merge waits its turn in its queue, or
    # runs: the refit is silent, but alive
    merging: bool = False


class RefitCondition(StrEnum):
    """What a look at a campaign's refit finds (:func:`refit_condition`)."""

    FINE = "fine"  # nothing to do: no refit wanted, or the one in charge is alive
    RETRY_DUE = "retry_due"  # a failed refit's back-off ran out: it is queued again
    UNENQUEUED = "unenqueued"  # queued, but its job never reached RQ: enqueued, no failure
    DEAD = "dead"  # it will never end by itself: a failure of the refit, revived or failed


def refit_condition(
    refit: Refit, now: float, lease: float, facts: Callable[[], JobFacts]
) -> RefitCondition:
    """The one decision on a campaign's refit that a look (``/next``, a worker's maintenance)
    acts on: whether its back-off ran out (:func:`retry_due`), or, for a suspect
    (:func:`refit_suspect`; only then is ``facts``, RQ's facts about its job, looked up, since
    that costs Redis calls), whether its job never reached RQ (:func:`refit_unenqueued`) or it
    is dead (:func:`refit_dead`)."""
    if retry_due(refit, now):
        return RefitCondition.RETRY_DUE
    if not refit_suspect(refit, now, lease):
        return RefitCondition.FINE
    job = facts()
    if refit_unenqueued(refit, now, job):
        return RefitCondition.UNENQUEUED
    return RefitCondition.DEAD if refit_dead(refit, now, lease, job) else RefitCondition.FINE


def refit_suspect(refit: Refit, now: float, lease: float) -> bool:
    """Whether the clock alone cannot tell that the refit is alive: then :func:`refit_dead`
    needs its job's facts (looked up only for suspects, since that costs Redis calls)."""
    if refit.phase == RefitPhase.RUNNING:
        return _silent(refit, now) > min(SILENT_SECONDS, lease)
    if refit.phase == RefitPhase.QUEUED:
        return now - refit.queued_at >= ENQUEUE_GRACE_SECONDS
    return False


def refit_unenqueued(refit: Refit, now: float, job: JobFacts) -> bool:
    """Whether a refit was queued (by a label, an import, a failed or abandoned run, the end of
    the refit before it, or a revival) but no job of it reached RQ within the grace: none was
    put in charge, or one was (``job``: RQ's facts about it) and never enqueued. The process
    that was to enqueue it stopped in between. Nothing failed: it is enqueued, not counted."""
    if refit.phase != RefitPhase.QUEUED or now - refit.queued_at < ENQUEUE_GRACE_SECONDS:
        return False
    return not refit.job or not job.exists


def refit_dead(refit: Refit, now: float, lease: float, job: JobFacts) -> bool:
    """Whether the refit a campaign waits for will never end by itself: a running one whose
    heartbeat is older than ``lease`` seconds (its worker died), or whose heartbeat stopped and
    whose job failed (its work horse was killed); a queued one whose job is gone (failed,
    deleted, or taken by a worker that no longer exists). A queued one whose job never reached
    RQ is :func:`refit_unenqueued`, not dead; a running one whose merge waits or runs
    (``job.merging``) is alive."""
    if not refit_suspect(refit, now, lease):
        return False
    if refit.phase == RefitPhase.RUNNING:
        silent = _silent(refit, now)
        if job.merging:
            return False
        return silent > lease or (silent > SILENT_SECONDS and job.failed)
    return bool(refit.job) and job.exists and not job.alive


def _silent(refit: Refit, now: float) -> float:
    return now - (refit.heartbeat or refit.started_at)
