"""A campaign's failure model (``failures``): whether a GP classifier of its runs' success
weighs the acquisition, and the least probability of success of a point handed out; and the
body of ``POST .../retry``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field
from pydantic import Strict as StrictValue

from fbgp_al.service.schemas.fields import Strict
from fbgp_al.worker.vocabulary.defaults import BRACKET, MIN_SUCCESS, WEIGHT_QUANTILE


class FailureModel(Strict):
    """How a campaign learns where its simulator fails (docs: failures, retries and pauses)."""

    model: Literal["classifier", "none"] = "classifier"
    """`classifier`: once a run has failed, each refit fits a GP classifier of success against
    failure to the labels and the failed runs (abandoned runs do not count) over the inputs the
    regression GP sees, leaves out the candidates whose probability of success is below
    `min_success` and weighs every other one's acquisition score by a pessimistic chance of
    success (its `weight_quantile` quantile under the classifier's posterior: near 0 near a
    failure, where the model does not know where the region ends, near 1 where it is sure);
    `/predict` and the export give `p_success`. A
    campaign without a failed run pays nothing and ranks as without it. `none`: no model sees the
    failures (the behavior before the option, and the paper's protocol)."""
    min_success: Annotated[float, StrictValue(), Field(ge=0.0, lt=1.0, allow_inf_nan=False)] = (
        MIN_SUCCESS
    )
    """A point whose probability of success is below this is never handed out (0: every point
    may be, weighed by its pessimistic chance of success)."""
    weight_quantile: Annotated[float, StrictValue(), Field(gt=0.0, le=0.5, allow_inf_nan=False)] = (
        WEIGHT_QUANTILE
    )
    """The quantile of a candidate's chance of success, under the classifier's posterior, that
    weighs its acquisition score: 0.5 weighs by the median (a point's chance with the model's
    doubt ignored); lower values weigh a point down where the model is unsure whether it
    succeeds, as next to a failure. The default keeps the most runs out of a crash region;
    0.2 spends a run or two more there for labels next to it (measured in the manual's
    failures guide)."""
    bracket: Annotated[float, StrictValue(), Field(ge=0.0, le=1.0, allow_inf_nan=False)] = BRACKET
    """A failed and a successful run at most this far apart (in the unit cube, a choice's values
    sqrt 2 apart) bracket the region's border: a candidate nearer to each of the two than they
    are to each other is weighed by its median chance of success, not the `weight_quantile`, so
    that the first feasible points beside a failure get labels (a run there labels one or halves
    the bracket). 0 turns it off. Measured in the manual's failures guide."""


class Retry(Strict):
    """``POST .../retry``'s optional body."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"forget_failures": True}]})

    forget_failures: bool = False
    """The simulator changed: the failure model forgets every run failed so far (they stay counted
    and in the history), so the points it steered away from are ranked again. Without it the model
    keeps them, so a retry does not send runs back into the region where they failed."""
