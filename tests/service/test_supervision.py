"""The rule of a refit's life (:mod:`service.supervision`): a back-off run out, a queued
refit never enqueued, a dead one, told apart by the clock and RQ's facts about its job."""

from __future__ import annotations

from fbgp_al.service.loop import Refit, RefitPhase
from fbgp_al.service.supervision import (
    JobFacts,
    RefitCondition,
    refit_condition,
    refit_dead,
    refit_suspect,
    refit_unenqueued,
)


def test_one_function_decides_what_a_look_at_a_refit_does():
    """refit_condition: a back-off run out, a queued refit never enqueued, a dead one, or
    nothing; RQ's facts are looked up only for a suspect."""
    now, lease = 100.0, 15.0
    looked: list[str] = []

    def facts(found: JobFacts):
        return lambda: looked.append("rq") or found

    C = RefitCondition
    gone, alive = JobFacts(False, False), JobFacts(True, False)
    unpushed = JobFacts(False, False, exists=False)
    assert refit_condition(Refit(), now, lease, facts(gone)) == C.FINE
    beating = Refit(phase=RefitPhase.RUNNING, job="j", heartbeat=now - 1.0)
    assert refit_condition(beating, now, lease, facts(gone)) == C.FINE
    assert looked == []  # the clock alone tells: no Redis call
    backed_off = Refit(retry_at=now - 1.0)
    assert refit_condition(backed_off, now, lease, facts(gone)) == C.RETRY_DUE
    assert refit_condition(Refit(retry_at=now + 1.0), now, lease, facts(gone)) == C.FINE
    failed = Refit(retry_at=now - 1.0, failed="why")  # waits for its owner's retry
    assert refit_condition(failed, now, lease, facts(gone)) == C.FINE
    late = Refit(phase=RefitPhase.QUEUED, job="j", queued_at=now - 10.0)
    assert refit_condition(late, now, lease, facts(unpushed)) == C.UNENQUEUED
    assert refit_condition(late, now, lease, facts(gone)) == C.DEAD
    assert refit_condition(late, now, lease, facts(alive)) == C.FINE
    silent = Refit(phase=RefitPhase.RUNNING, job="j", heartbeat=now - 20.0)
    assert refit_condition(silent, now, lease, facts(alive)) == C.DEAD
    assert looked == ["rq"] * 4


def test_a_refit_is_dead_only_when_the_clock_and_its_job_say_so():
    alive, gone, failed = JobFacts(True, False), JobFacts(False, False), JobFacts(False, True)
    now, lease = 100.0, 15.0
    idle = Refit()
    assert not refit_suspect(idle, now, lease) and not refit_dead(idle, now, lease, gone)
    queued = Refit(phase=RefitPhase.QUEUED, job="j", queued_at=now - 1.0)
    assert not refit_dead(queued, now, lease, gone)  # its enqueue may be on its way
    late = Refit(phase=RefitPhase.QUEUED, job="j", queued_at=now - 5.0)
    assert refit_dead(late, now, lease, gone) and not refit_dead(late, now, lease, alive)
    never_enqueued = Refit(phase=RefitPhase.QUEUED, queued_at=now - 5.0)  # its enqueuer stopped
    assert not refit_dead(never_enqueued, now, lease, alive)
    assert refit_unenqueued(never_enqueued, now, gone)
    assert not refit_unenqueued(Refit(phase=RefitPhase.QUEUED, queued_at=now - 1.0), now, gone)
    assert not refit_unenqueued(late, now, gone)  # a job is in charge: alive or dead, not this
    unpushed = JobFacts(False, False, exists=False)  # its id was written, RQ never got it
    assert refit_unenqueued(late, now, unpushed) and not refit_dead(late, now, lease, unpushed)
    merging = JobFacts(False, False, merging=True)  # its groups are done, its merge waits
    assert not refit_dead(
        Refit(phase=RefitPhase.RUNNING, job="j", heartbeat=now - 60.0), now, lease, merging
    )
    beating = Refit(phase=RefitPhase.RUNNING, job="j", heartbeat=now - 1.0)
    assert not refit_suspect(beating, now, lease)
    assert not refit_dead(beating, now, lease, failed)
    silent = Refit(phase=RefitPhase.RUNNING, job="j", heartbeat=now - 5.0)
    assert refit_dead(silent, now, lease, failed)  # its work horse was killed
    assert not refit_dead(silent, now, lease, alive)
    assert refit_dead(
        Refit(phase=RefitPhase.RUNNING, job="j", heartbeat=now - 20.0), now, lease, alive
    )
    # a lease shorter than the silence that makes a refit suspect still counts
    assert refit_dead(Refit(phase=RefitPhase.RUNNING, heartbeat=now - 2.0), now, 1.0, alive)
