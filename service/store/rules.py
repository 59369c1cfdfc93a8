"""The rules the store's Lua scripts apply atomically, each stated once in Python beside the
scripts (its script names it; it names its script): what a label, an import, a failed or
abandoned run and a lease's renewal come to, when a refit is requested, when one runs again at
its end, and how long a failed one waits; how labels move a campaign between the counts by
phase, what the owner's retry clears, which tickets expire and are pruned, which ticket an
Idempotency-Key answers, and whether a model call is admitted. The service runs the scripts,
not these: ``tests/service/store/test_rules.py`` runs both on random states and requires the
same outcome."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fbgp_al.service.loop import (
    ImportOutcome,
    LabelOutcome,
    Phase,
    Refit,
    RefitPhase,
    RenewOutcome,
    Rules,
    RunOutcome,
    failed_state,
    failing,
    labeled_state,
    phase,
)


def label_outcome(
    rules: Rules,
    ticket_state: str | None,
    y: float,
    n_labeled: int,
    point_labeled: bool,
    noise: float | None = None,
) -> LabelOutcome:
    """The outcome of posting ``y`` (and its ``noise`` variance, if known) for a ticket in
    ``ticket_state`` (None: no such ticket; ``pending``; :func:`service.loop.labeled_state`),
    ``point_labeled``: its pool point has a label already. A ticket whose lease expired is
    still ``pending``: its label is taken while its point has none. The same label again
    (``y`` and ``noise``) changes nothing; another conflicts. A pending ticket whose label
    conflicts because its point has a label (without repeats: another ticket's, or an import's)
    can never be labeled: it ends :data:`service.loop.SUPERSEDED` (a pending ticket's
    CONFLICT), so its lease holds no place among the tickets out (``label.lua``)."""
    if ticket_state is None:
        return LabelOutcome.UNKNOWN_TICKET
    if ticket_state != "pending":
        same = ticket_state == labeled_state(y, noise)
        return LabelOutcome.SAME_AGAIN if same else LabelOutcome.CONFLICT
    if point_labeled and not rules.allow_repeats:
        return LabelOutcome.CONFLICT
    if n_labeled >= rules.max_labels:
        return LabelOutcome.DONE
    return LabelOutcome.STORED


def fail_outcome(ticket_state: str | None, reason: str) -> RunOutcome:
    """Reporting that a ticket's run failed with ``reason``: stored while the ticket is
    ``pending`` (its lease expired or not); the same report again changes nothing; any other
    end of the ticket conflicts. (``fail_run.lua``)
    (A ticket that failed before its state held a digest holds ``failed:<reason>``.)"""
    if ticket_state == f"failed:{reason}":
        return RunOutcome.SAME_AGAIN
    return _end_outcome(ticket_state, failed_state(reason))


def abandon_outcome(ticket_state: str | None) -> RunOutcome:
    """Abandoning a ticket: its point goes back to the pool (``abandon.lua``)."""
    return _end_outcome(ticket_state, "abandoned")


def _end_outcome(ticket_state: str | None, end: str) -> RunOutcome:
    if ticket_state is None:
        return RunOutcome.UNKNOWN_TICKET
    if ticket_state == "pending":
        return RunOutcome.STORED
    return RunOutcome.SAME_AGAIN if ticket_state == end else RunOutcome.CONFLICT


def renew_outcome(ticket_state: str | None, lease_live: bool) -> RenewOutcome:
    """Renewing a ticket's lease: only a pending ticket whose lease has not run out (once it
    has, its point may be out again under another ticket; a late label is still taken)."""
    if ticket_state is None:
        return RenewOutcome.UNKNOWN_TICKET
    if ticket_state != "pending":
        return RenewOutcome.ENDED
    return RenewOutcome.RENEWED if lease_live else RenewOutcome.EXPIRED


def refit_due(rules: Rules, n_labeled: int, refit: RefitPhase, failed: bool = False) -> bool:
    """After labels were stored, or a run failed or was abandoned (the ranking must leave out a
    point failed for good, and take back one abandoned): a refit is queued once the design is
    labeled, unless one is queued or running already (that one runs again at its end,
    :func:`refit_again`), or the campaign failed (its owner's retry queues one). New data ends
    a failed refit's back-off (``request_refit.lua``)."""
    return n_labeled >= rules.design_size and refit == RefitPhase.IDLE and not failed


def backoff(failures: int, base: float, cap: float, died: bool) -> float:
    """Seconds a refit waits before it runs again after its ``failures``-th failure in a row:
    ``base``, doubling with each failure, at most ``cap``; a job that died (``died``: its worker
    may have been killed for reasons of its own) is revived at once the first time
    (``after_failure.lua``)."""
    doublings = failures - 2 if died else failures - 1
    return 0.0 if doublings < 0 else min(cap, base * 2.0**doublings)


def refit_again(n_labeled: int, n_seen: int, changed: bool = False) -> bool:
    """At a refit's end: one more refit runs if labels arrived after it read them, or runs
    failed or were abandoned after it started (its ranking may hold those points;
    ``end_refit.lua``)."""
    return n_labeled > n_seen or changed


def import_outcome(
    rules: Rules,
    n_labeled: int,
    indices: Sequence[int | None],
    labeled: frozenset[int],
    held: str | None = None,
    digest: str = "",
) -> ImportOutcome:
    """Imported observations (of pool points ``indices``; None: not a pool point) are stored
    all or none: an import whose Idempotency-Key holds the record ``held`` (``digest n count``)
    of one stored before is that one again if its observations' digest is ``digest`` (else the
    key is reused), and stores nothing; none is stored if they would exceed max_labels, nor,
    unless the campaign allows repeats, if one is a pool point ``labeled`` already or appears
    twice among them (``import_observations.lua``). Stored, they move the campaign's phase
    (:func:`phase_moves`) and a refit may be due (:func:`refit_due`)."""
    if held is not None:
        same = held.split()[0] == digest
        return ImportOutcome.SAME_AGAIN if same else ImportOutcome.KEY_REUSED
    if n_labeled + len(indices) > rules.max_labels:
        return ImportOutcome.TOO_MANY
    points = [i for i in indices if i is not None]
    repeated = len(set(points)) < len(points) or not labeled.isdisjoint(points)
    if repeated and not rules.allow_repeats:
        return ImportOutcome.REPEATED
    return ImportOutcome.STORED


def phase_moves(
    rules: Rules, before: int, after: int, failed: bool = False, stopped: bool = False
) -> dict[Phase, int]:
    """What labels taking a campaign from ``before`` to ``after`` add to the counts of
    campaigns by phase (:func:`service.loop.phase`; kept while the counts exist, so that
    ``/metrics`` reads them and not every campaign: ``count_phases.lua``)."""
    start = phase(rules, before, failed, stopped)
    end = phase(rules, after, failed, stopped)
    return {} if start == end else {start: -1, end: 1}


@dataclass(frozen=True)
class Retry:
    """What the owner's retry did (``retry.lua``, which answers 0 unless ``cleared``, then 2
    with a ``refit`` queued under the retry's job, else 1); ``phases``: what it adds to the
    counts by phase."""

    cleared: bool = False
    forgiven: bool = False  # the failed runs count no more; points failed for good come back
    forgotten: bool = False  # ... and the failure model forgets them (from now)
    refit: bool = False
    phases: Mapping[Phase, int] | None = None


def retry_outcome(rules: Rules, refit: Refit, n_labeled: int, stalled: bool, forget: bool) -> Retry:
    """The owner's retry of a campaign in ``refit`` state with ``n_labeled`` labels: a failed
    one (its refits failed too often in a row) is failed no more; the failed runs of one that
    is failing (:func:`service.loop.failing`) or ``stalled`` (:func:`service.loop.stalled`),
    or that has a failed run and is told to ``forget`` them (the simulator changed), are
    forgiven. Then, once its design is labeled, a failed one's refit is queued; another's is
    requested (:func:`refit_due`). Nothing else is retried."""
    refit_failed = bool(refit.failed)
    forgotten = forget and refit.n_failed > 0
    forgiven = failing(rules, refit.n_failed, refit.n_forgiven) or stalled or forgotten
    if not refit_failed and not forgiven:
        return Retry()
    if not refit_failed:
        due = refit_due(rules, n_labeled, refit.phase)
        return Retry(True, forgiven, forgotten, due, {})
    again = phase(rules, n_labeled, stopped=bool(refit.stopped))
    queued = n_labeled >= rules.design_size
    return Retry(True, forgiven, forgotten, queued, {Phase.FAILED: -1, again: 1})


@dataclass(frozen=True)
class Expiry:
    """The tickets after :func:`expire_tickets`: ``leases`` and ``expired`` (ticket -> its
    expiry, or when it ended), those ``dropped`` (a late label for one is an unknown ticket),
    and how many left ``expired`` (``n``)."""

    leases: dict[str, float]
    expired: dict[str, float]
    dropped: frozenset[str]
    n: int


def _by_score(entries: Mapping[str, float]) -> list[str]:
    """A sorted set's members in its order: by score, then by name."""
    return sorted(entries, key=lambda member: (entries[member], member.encode()))


def expire_tickets(
    leases: Mapping[str, float],
    expired: Mapping[str, float],
    states: Mapping[str, str],
    now: float,
    before: float,
    batch: int,
    keep: int,
) -> Expiry:
    """Tickets whose lease ran out before ``now`` leave the leases for the expired ones (their
    points are offered again); then up to ``batch`` of those expired (or ended) before
    ``before``, and, while more than ``keep`` are left, up to ``batch`` of the oldest, leave
    them, and unless labeled (a label sent again is still recognized) the tickets and their
    states too (``expire.lua``)."""
    out = {t: e for t, e in leases.items() if e < now}
    leases = {t: e for t, e in leases.items() if t not in out}
    expired = {**expired, **out}
    dropped: set[str] = set()
    gone: list[str] = []

    def prune(tickets: list[str]) -> None:
        for ticket in tickets:
            state = states.get(ticket)
            if state is not None and not state.startswith("labeled:"):
                dropped.add(ticket)
            del expired[ticket]
            gone.append(ticket)

    prune([t for t in _by_score(expired) if expired[t] < before][:batch])
    over = min(len(expired) - keep, batch)
    if over > 0:
        prune(_by_score(expired)[:over])
    return Expiry(leases, expired, frozenset(dropped), len(gone))


def claim_key(
    requests: Mapping[str, str],
    states: Mapping[str, str],
    leases: Mapping[str, float],
    now: float,
    key: str,
    ticket: str,
) -> tuple[str, dict[str, str]]:
    """The ticket that ``/next``'s Idempotency-Key ``key`` answers, just issued ``ticket``
    or one the key answered before that is still out (pending, its lease not run out at
    ``now``: the same request sent again while the first waited), and the keys' tickets
    (``requests``) after: ``key`` bound to ``ticket`` unless the other one won, and once they
    hold more than twice the leases (and 64), those whose tickets are no longer out dropped
    (``claim.lua``)."""

    def out(name: str) -> bool:
        return states.get(name) == "pending" and leases.get(name, -float("inf")) >= now

    held = requests.get(key)
    if held is not None and held != ticket and out(held):
        return held, dict(requests)
    after = {**requests, key: ticket}
    if len(after) > 2 * len(leases) + 64:
        after = {k: t for k, t in after.items() if out(t)}
    return ticket, after


def admit_short(
    jobs: Mapping[str, float],
    shorts: Mapping[str, float],
    now: float,
    until: float,
    member: str,
    most: int,
    most_of_stack: int | None,
) -> tuple[int, dict[str, float], dict[str, float]]:
    """Whether model call ``member`` (``short:<id>``) is admitted, and the campaign's
    ``jobs`` and the stack's model calls (``shorts``) after, each noted until when it may be
    forgotten (those whose time ran out before ``now`` are dropped first): 1 noted (until
    ``until``; among the stack's unless ``most_of_stack`` is None, a plot), -1 if ``most`` of
    the campaign's model calls are out already, -2 if ``most_of_stack`` of the stack's are
    (``admit_short.lua``; 0, the campaign is gone, is no rule's)."""
    jobs = {m: t for m, t in jobs.items() if t >= now}
    shorts = {m: t for m, t in shorts.items() if t >= now}
    if sum(m.startswith("short:") for m in jobs) >= most:
        return -1, jobs, shorts
    if most_of_stack is not None and len(shorts) >= most_of_stack:
        return -2, jobs, shorts
    jobs[member] = until
    if most_of_stack is not None:
        shorts[member] = until
    return 1, jobs, shorts
