"""A multi-fidelity campaign's levels as posted (:class:`FidelitySpec`), and the checks a
campaign body with ``fidelities`` must pass against its other settings (:func:`check_fidelities`;
the levels' vocabulary is :mod:`worker.vocabulary.fidelities`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from fbgp_al.service.names import visible
from fbgp_al.service.schemas.fields import Finite, Strict
from fbgp_al.worker.vocabulary.defaults import FIDELITY_ACQUISITIONS
from fbgp_al.worker.vocabulary.fidelities import LEVEL, design_counts

MAX_FIDELITIES = 10


class FidelitySpec(Strict):
    """One fidelity level of the simulator: its name and the cost of one run at it."""

    name: Annotated[str, AfterValidator(visible)] = Field(min_length=1, max_length=100)
    """The level's name: what `/next` says in `fidelity`, a label or an import names, and
    `{fidelity}` of `fbgp-al run` becomes."""
    cost: Finite = Field(gt=0)
    """The cost of one run at this level, in any unit (seconds, core-hours, money), the same
    for every level; above the level below's."""


def check_fidelities(body) -> None:
    """ValueError, naming the field, unless a campaign body's ``fidelities`` (and
    ``max_cost``) fit its other settings: distinct names, costs strictly increasing, no input
    named ``fidelity``, one output with learned noise and no transform, an acquisition that
    weighs levels (``ivr``, or a disagreement at the top level), an initial design of at least
    :data:`MIN_PER_LEVEL` runs per level, an explicit pool whose points each end with a level's
    name. A body without ``fidelities`` may not set ``max_cost`` nor choose ``ivr``."""
    fidelities = body.fidelities
    if fidelities is None:
        if body.max_cost is not None:
            raise ValueError("max_cost: a budget in cost needs fidelities with their costs")
        if body.acquisition == "ivr":
            raise ValueError("acquisition: ivr weighs fidelity levels; it needs fidelities")
        return
    names = [f.name for f in fidelities]
    if len(set(names)) != len(names):
        same = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"fidelities: two levels are named {same!r}; name them apart")
    for lower, upper in zip(fidelities, fidelities[1:], strict=False):
        if not upper.cost > lower.cost:
            raise ValueError(
                f"fidelities: costs must increase strictly, lowest level first "
                f"({lower.name!r} costs {lower.cost:g}, {upper.name!r} {upper.cost:g})"
            )
    if any(i.name == LEVEL for i in body.inputs):
        raise ValueError(
            f"inputs: {LEVEL!r} names the level of a campaign with fidelities; rename the input"
        )
    if body.outputs is not None:
        raise ValueError("fidelities: a campaign with fidelities has one output (no outputs)")
    if body.noise.type != "learned":
        raise ValueError("fidelities: a campaign with fidelities learns each level's noise")
    if body.transform != "none":
        raise ValueError('fidelities: a campaign with fidelities models y as it is ("none")')
    if body.input_scaling != "box":
        raise ValueError('fidelities: a campaign with fidelities scales its inputs by "box"')
    if "acquisition" not in body.model_fields_set:
        body.acquisition = "ivr"
    elif body.acquisition not in FIDELITY_ACQUISITIONS:
        raise ValueError(
            f"acquisition: with fidelities one of {list(FIDELITY_ACQUISITIONS)} (ivr: the top "
            f"level's variance removed per cost; the others at the top level, the level by "
            f"ivr), not {body.acquisition!r}"
        )
    if "initial_design" not in body.model_fields_set:
        body.initial_design = type(body.initial_design)(size=3 * len(fidelities))
    try:
        design_counts(body.initial_design.size, len(fidelities))
    except ValueError as error:
        raise ValueError(f"initial_design.size: {error}") from None
    pool = body.pool
    if pool.type == "points":
        width = len(body.inputs) + 1
        for k, point in enumerate(pool.points):
            if len(point) != width:
                raise ValueError(
                    f"pool.points: with fidelities each point ends with its level's name "
                    f"(one of {names}): point {k} has {len(point)} values, not "
                    f"{len(body.inputs)} inputs and a level"
                )
