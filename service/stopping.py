"""The stopping rule a campaign may have (its spec's ``stop``): whether the accuracy of its
latest models, in its history, meets it. Pure, as :mod:`service.loop`; the store stops the
campaign with the model that meets it, in one step (``save_model.lua``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def stop_verdict(
    rule: Mapping | None, history: Sequence[Mapping], design_size: int, targets: Sequence[str]
) -> dict | None:
    """Whether a campaign's stopping rule (its spec's ``stop``) is met by its history's latest
    model: ``{rule, value, target, version}`` for the first of ``targets`` that the rule names
    whose value is at or below it on each of the ``patience`` latest models (those since the
    owner last resumed the campaign, with at least ``min_labels`` labels: default the design's
    size + 1); None if none is."""
    if not rule:
        return None
    min_labels = rule.get("min_labels") or design_size + 1
    patience = int(rule.get("patience") or 1)
    resumed = [i for i, e in enumerate(history) if e.get("event") == "resumed"]
    since = resumed[-1] + 1 if resumed else 0
    models = [
        e
        for e in history[since:]
        if e.get("event") == "model" and e.get("accuracy") and e["version"] >= min_labels
    ]
    if len(models) < patience:
        return None
    window = models[-patience:]
    for name in targets:
        target = rule.get(name)
        values = [e["accuracy"].get(name) for e in window]
        if target is not None and all(v is not None and v <= target for v in values):
            return {
                "rule": name,
                "value": values[-1],
                "target": target,
                "version": window[-1]["version"],
            }
    return None
