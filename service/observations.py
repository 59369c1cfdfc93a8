"""Observations arrive: an import's story, read top to bottom (``POST .../observations``). The
router parses the body, calls :func:`arrive` and answers with what it returns; each refusal is
the domain's (:mod:`service.refusals`), mapped to HTTP by the API."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from fbgp_al.service import limits
from fbgp_al.service.checks import spec_with_points
from fbgp_al.service.loop import ImportOutcome
from fbgp_al.service.refusals import Conflict, Unprocessable, unprocessable_values
from fbgp_al.service.settings import Settings
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.values import check_noise, checked_rows


@dataclass(frozen=True)
class Arrived:
    """What an import did: the campaign's labels after it, how many it brought, and whether it
    is the same import again (its Idempotency-Key seen before: nothing was stored now)."""

    n_labeled: int
    imported: int
    again: bool = False


def arrive(
    store: CampaignStore,
    settings: Settings,
    campaign_id: str,
    x: list,
    y: list,
    noise: list | None,
    key: str | None,
    now: float,
    fidelity: list | None = None,
) -> Arrived:
    """Import labels for points labeled elsewhere, all or none:

    1. the points must fit the campaign's inputs, the values its outputs and noise model; with
       fidelities each point needs its level (``fidelity``, one of the campaign's);
    2. with an Idempotency-Key, an import stored before under it is answered as it was (the
       key with other observations is refused);
    3. the labels after it must stay within the stack's ``limit_labels``;
    4. the store takes them atomically (``import_observations.lua``), or refuses them all: past
       ``max_labels``, or a pool point labeled already where the campaign allows no repeats;
    5. the refit they make due goes on the queue; with ``max_cost``, the campaign stops once
       its labels' cost reaches it.
    """
    spec, x = spec_with_points(store, campaign_id, x, fidelity, required=True)
    with unprocessable_values():
        check_noise(spec, noise is not None, "noise", "noise (the variance of each y)")
        y, noise = checked_rows(spec, y, noise)
    digest = ""
    if key is not None:
        digest = hashlib.sha256(json.dumps([x, y, noise]).encode()).hexdigest()
        held = store.labels.imported(campaign_id, key, digest)
        if held is not None:
            return _again(held[0], held[1], len(y))
    limits.check_import(store.campaigns.n_labeled(campaign_id), len(y), settings)
    outcome, n, due = store.labels.import_observations(campaign_id, x, y, now, noise, key, digest)
    store.refits.requested(campaign_id, due, spec)
    if outcome in (ImportOutcome.SAME_AGAIN, ImportOutcome.KEY_REUSED):
        return _again(outcome, n, len(y))
    if outcome == ImportOutcome.TOO_MANY:
        raise Conflict(
            f"{len(y)} more labels would exceed max_labels ({spec['max_labels']}; {n} stored)"
        )
    if outcome == ImportOutcome.REPEATED:
        raise Conflict(
            "a pool point among them has a label already, or appears twice, and "
            "the campaign does not allow repeats (allow_repeats): none was "
            "stored"
        )
    store.labels.stop_at_cost(campaign_id, spec)
    return Arrived(n, len(y))


def _again(outcome: ImportOutcome, n: int, count: int) -> Arrived:
    """An import whose Idempotency-Key was stored before: the first answer, or a refusal if the
    key came with other observations then."""
    if outcome == ImportOutcome.KEY_REUSED:
        raise Unprocessable(
            "this Idempotency-Key was sent with other observations before; "
            "send a new key with each import"
        )
    return Arrived(n, count, again=True)
