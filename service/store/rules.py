"""The rules the store's Lua scripts apply atomically, each stated once in Python beside the
scripts (its script names it; it names its script): what a label, a failed or abandoned run and
a lease's renewal come to, when a refit is requested, when one runs again at its end, and how
long a failed one waits. The service runs the scripts, not these: ``tests/service/store/
test_rules.py`` runs both on random states and requires the same outcome."""

from __future__ import annotations

from fbgp_al.service.loop import (
    LabelOutcome,
    RefitPhase,
    RenewOutcome,
    Rules,
    RunOutcome,
    failed_state,
    labeled_state,
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
