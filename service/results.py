"""A run's result arrives: a label (``POST .../label``), a failed run (``.../fail``) or a run
given up (``.../abandon``), each a story read top to bottom. The router parses the body, calls
the story and maps its outcome to HTTP (:func:`service.routes.labeling.label_status`,
:func:`~service.routes.labeling.run_status`); a refusal is the domain's
(:mod:`service.refusals`)."""

from __future__ import annotations

from fbgp_al.service.loop import LabelOutcome, RunOutcome
from fbgp_al.service.refusals import unprocessable_values
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.values import LabelValues


def label(
    store: CampaignStore, campaign_id: str, ticket: str, values: LabelValues, now: float
) -> tuple[LabelOutcome, int]:
    """A label arrives for ``ticket``:

    1. the campaign's spec is read (404 if it is gone);
    2. the values are checked against its outputs and noise model (``values(spec)``; refused
       as unprocessable if they do not fit);
    3. the store takes the label atomically (``label.lua``: stored, the same again, or the
       ticket's conflict, unknown ticket, or the campaign done) and wakes the campaign's pollers;
       with ``max_cost``, the campaign stops once its labels' cost reaches it;
    4. the refit it makes due goes on the queue.

    ``(outcome, n_labeled)``."""
    spec = store.campaigns.spec(campaign_id)
    with unprocessable_values():
        y, noise = values(spec)
    outcome, n, due = store.labels.record(campaign_id, ticket, y, now, noise, spec=spec)
    if outcome == LabelOutcome.STORED:
        store.labels.stop_at_cost(campaign_id, spec)
    store.refits.requested(campaign_id, due, spec)
    return outcome, n


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
