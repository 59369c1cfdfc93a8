"""The bodies of HTTP answers that several routes and pages send, built from the store's facts:
a campaign's status (:class:`service.schemas.campaigns.CampaignStatus`)."""

from __future__ import annotations

import contextlib
import json
import time

from fbgp_al.service import loop
from fbgp_al.service.loop import Refit, Rules
from fbgp_al.service.refusals import NotFound
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary import fidelities


def status(store: CampaignStore, campaign_id: str, now: float | None = None) -> dict:
    """Campaign ``campaign_id``'s status, as ``GET /campaigns/{id}`` answers it."""
    spec = store.campaigns.spec(campaign_id)
    now = time.time() if now is None else now
    rules = Rules.of(spec)
    state = store.campaigns.state(campaign_id)
    refit = Refit.of(state)
    n = store.campaigns.n_labeled(campaign_id)
    pending = store.tickets.n_pending(campaign_id, now)
    n_failed = store.runs.n_failed(campaign_id, state)
    # only runs that failed can stall a campaign: the whole snapshot is read only then
    stalled = n_failed > 0 and loop.stalled(rules, store.tickets.snapshot(campaign_id, now, False))
    failing = loop.failing(rules, n_failed, refit.n_forgiven)
    phase = loop.phase(rules, n, bool(refit.failed), bool(refit.stopped))
    body = {
        "id": campaign_id,
        "name": spec["name"],
        "team": spec.get("team"),
        "state": str(loop.state(phase, failing, stalled)),
        "n_labeled": n,
        "n_pending": pending,
        "max_labels": spec["max_labels"],
        "model_version": refit.model_version,
        "last_error": refit.last_error,
        "refit_failures": refit.failures,
        "refit_retry_at": refit.retry_at or None,
        "refit": str(refit.phase),
        "acquisition": spec["acquisition"],
        "mode": spec["mode"],
        "inputs": fidelities.declared_inputs(spec),
        "outputs": spec.get("outputs"),
        "n_failed": n_failed,
        "n_abandoned": refit.n_abandoned,
        "n_forgiven": refit.n_forgiven,
        "max_failures": rules.failure_limit,
        "failing": failing,
        "stalled": stalled,
        "stopped_by": json.loads(refit.stopped) if refit.stopped else None,
    }
    if fidelities.levels(spec):
        labels = store.labels.all(campaign_id)
        body["fidelities"] = spec["fidelities"]
        body["max_cost"] = spec.get("max_cost")
        body["cost_spent"] = fidelities.spent(spec, labels)
        body["labels_per_fidelity"] = fidelities.counts(spec, labels)
    return body


def statuses(store: CampaignStore, ids: list[str]) -> list[dict]:
    """The status of each campaign of ``ids`` that still exists (deleted meanwhile: left out)."""
    out = []
    for campaign_id in ids:
        with contextlib.suppress(NotFound):
            out.append(status(store, campaign_id))
    return out
