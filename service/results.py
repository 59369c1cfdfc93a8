"""A run's result arrives: a label (``POST .../label``), a failed run (``.../fail``) or a run
given up (``.../abandon``), each a story read top to bottom. The router parses the body, calls
the story and maps its outcome to HTTP (:func:`service.routes.labeling.label_status`,
:func:`~service.routes.labeling.run_status`); a refusal is the domain's
(:mod:`service.refusals`)."""

from __future__ import annotations

from fbgp_al.service.loop import LabelOutcome, RunOutcome
from fbgp_al.service.refusals import Unprocessable, unprocessable_values
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.fidelities import levels
from fbgp_al.worker.vocabulary.values import LabelValues


def label(
    store: CampaignStore,
    campaign_id: str,
    ticket: str,
    values: LabelValues,
    now: float,
    fidelity: str | None = None,
) -> tuple[LabelOutcome, int]:
    """A label arrives for ``ticket``:

    1. the campaign's spec is read (404 if it is gone);
    2. the values are checked against its outputs and noise model (``values(spec)``; refused
       as unprocessable if they do not fit), and the level the label says it is of
       (``fidelity``, if any) against its ticket's (:func:`check_level`);
    3. the store takes the label atomically (``label.lua``: stored, the same again, or the
       ticket's conflict, unknown ticket, or the campaign done) and wakes the campaign's pollers;
       with ``max_cost``, the campaign stops once its labels' cost reaches it;
    4. the refit it makes due goes on the queue.

    ``(outcome, n_labeled)``."""
    spec = store.campaigns.spec(campaign_id)
    with unprocessable_values():
        y, noise = values(spec)
    if fidelity is not None:
        check_level(store, campaign_id, spec, ticket, fidelity)
    outcome, n, due = store.labels.record(campaign_id, ticket, y, now, noise, spec=spec)
    if outcome == LabelOutcome.STORED and spec.get("max_cost"):  # a budget in cost
        store.labels.stop_at_cost(campaign_id, spec)
    store.refits.requested(campaign_id, due, spec)
    return outcome, n


def check_level(
    store: CampaignStore, campaign_id: str, spec: dict, ticket: str, fidelity: str
) -> None:
    """Refused as unprocessable unless ``fidelity`` is one of the campaign's levels and the
    one ``ticket`` was issued for (an unknown ticket is left to the store to answer)."""
    names = levels(spec)
    if names is None:
        raise Unprocessable("fidelity: this campaign has one fidelity; send no fidelity")
    if fidelity not in names:
        raise Unprocessable(f"fidelity: unknown level {fidelity!r} (one of {names})")
    issued = store.tickets.level(campaign_id, ticket)
    if issued is not None and issued != fidelity:
        raise Unprocessable(
            f"fidelity: the ticket was issued for level {issued!r}, and this label says "
            f"{fidelity!r}; run the point at {issued!r}, or abandon the ticket"
        )


def fail(
    store: CampaignStore, campaign_id: str, ticket: str, reason: str, now: float
) -> tuple[RunOutcome, int]:
    """``ticket``'s run failed: the spec read; the failure kept and counted atomically
    (``fail_run.lua``: its point offered again while ``max_retries`` allows, the failure model
    told); the pollers woken; once the design is labeled, the refit it makes due (so that the
    ranking leaves out a point failed for good) on the queue. ``(outcome, n_failed)``."""
    spec = store.campaigns.spec(campaign_id)
    outcome, n, due = store.runs.fail(campaign_id, ticket, reason, now, spec=spec)
    store.refits.requested(campaign_id, due, spec)
    return outcome, n


def abandon(
    store: CampaignStore, campaign_id: str, ticket: str, now: float
) -> tuple[RunOutcome, int]:
    """``ticket`` is given up: the spec read; the ticket ended atomically (``abandon.lua``),
    its point free again at once; the pollers woken; a refit it makes due on the queue.
    ``(outcome, n_abandoned)``."""
    spec = store.campaigns.spec(campaign_id)
    outcome, n, due = store.runs.abandon(campaign_id, ticket, now, spec=spec)
    store.refits.requested(campaign_id, due, spec)
    return outcome, n
