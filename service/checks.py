"""What a request's values must fit, checked by the routes and the stories: its points the
campaign's inputs (with fidelities, each joined to its level), its outputs and noise variances
the campaign's outputs and noise model (:mod:`worker.vocabulary.values`); refused as
:class:`service.refusals.Unprocessable` otherwise."""

from __future__ import annotations

from fbgp_al.service.refusals import Unprocessable, unprocessable_values
from fbgp_al.service.schemas.inputs import check_points
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.fidelities import declared_inputs, join, levels


def spec_with_points(
    store: CampaignStore,
    campaign_id: str,
    x: list,
    fidelity: list[str] | str | None = None,
    required: bool = False,
) -> tuple[dict, list]:
    """The campaign's spec and ``x`` with each value as its input keeps it, once ``x`` is known
    to fit its inputs (422 otherwise); with fidelities, each point joined to its level
    (:func:`at_levels`)."""
    spec = store.campaigns.spec(campaign_id)
    x = at_levels(spec, x, fidelity, required)
    with unprocessable_values():
        return spec, check_points(x, spec["inputs"])


def at_levels(spec: dict, x: list, fidelity: list[str] | str | None, required: bool) -> list:
    """``x`` as the store keeps it: in a campaign with fidelities, each point (of the declared
    inputs) followed by its level's name, from ``fidelity``, one per point or one for all, or
    the top level where it is None (a 422 instead if ``required``); in a campaign of one
    fidelity, ``x`` itself (a 422 if a ``fidelity`` is given)."""
    names = levels(spec)
    if names is None:
        if fidelity is not None:
            raise Unprocessable("fidelity: this campaign has one fidelity; send no fidelity")
        return x
    if fidelity is None:
        if required:
            raise Unprocessable(f"fidelity: the level of each point is needed, one of {names}")
        fidelity = names[-1]
    per_point = [fidelity] * len(x) if isinstance(fidelity, str) else list(fidelity)
    if len(per_point) != len(x):
        raise Unprocessable(f"fidelity: x has {len(x)} points but fidelity has {len(per_point)}")
    unknown = next((f for f in per_point if f not in names), None)
    if unknown is not None:
        raise Unprocessable(f"fidelity: unknown level {unknown!r} (one of {names})")
    dim = len(declared_inputs(spec))
    for k, point in enumerate(x):
        if len(point) != dim:
            raise Unprocessable(
                f"point {k} has {len(point)} coordinates, the campaign has {dim} inputs (its "
                "level goes in fidelity)"
            )
    return join(x, per_point)
