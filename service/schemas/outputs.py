"""A campaign's outputs (several, by name, each with its weight in the acquisition and its
transform) and how the noise of its labels is modeled: one learned variance, or each label's
known one."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_serializer, model_validator

from fbgp_al.service.names import visible
from fbgp_al.service.schemas.fields import MAX_TEXT, Strict


class LearnedNoise(Strict):
    """One noise variance ``s2`` for every label, sampled with the lengthscales (the default)."""

    type: Literal["learned"] = "learned"
    """`learned`: one noise variance for all labels, sampled with the lengthscales."""


class KnownNoise(Strict):
    """Each label carries its noise variance (``noise``, or ``y_replicates``); the GP's
    covariance of the labels is ``Kf + diag(noise / y_std^2) + s2 I`` with ``s2`` a learned
    nugget on top (an output modeled on the log scale: ``noise / y^2 / y_std^2``, the delta
    method's variance of log y)."""

    type: Literal["known"]
    """`known`: each label carries its own noise variance."""
    nugget: bool = True
    """A learned nugget on top of the known variances; `true` is the only choice."""

    @model_validator(mode="after")
    def _with_nugget(self):
        if not self.nugget:
            raise ValueError(
                "nugget: false is not supported: the sampler's parameters are the "
                "lengthscales and the nugget s2 (give nugget: true; with accurate "
                "noise variances its posterior stays small)"
            )
        return self


# an output's transform (worker.vocabulary.defaults.OUTPUT_TRANSFORMS)
OutputTransform = Literal["none", "log"]


class OutputSpec(Strict):
    """A named output of a multi-output campaign, and its weight in the acquisition."""

    name: Annotated[str, AfterValidator(visible)] = Field(
        min_length=1, max_length=MAX_TEXT, pattern=r"^[^=\s,]+$"
    )
    """The output's name (no spaces, `=` or `,`; NFKC, nothing invisible, one script): the key of
    `y` in labels and answers."""
    weight: float = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)
    """The output's weight in the acquisition: points are ranked by the weighted sum of each
    output's standardized score."""
    transform: OutputTransform = "none"
    """`none`: the GP models the output as it is; `log`: it models log y (see the campaign's
    `transform`)."""
    units: Annotated[str, AfterValidator(visible)] | None = Field(
        default=None, min_length=1, max_length=40
    )
    """The output's units, for people (`"MPa"`): the campaign page's pictures and the report
    name the output as `stress [MPa]`; nothing else reads them."""

    @model_serializer(mode="wrap")
    def _unsaid(self, handler):
        """An output modeled as it is (the default) and one without units are written as
        before the options existed: without ``transform`` and ``units``."""
        data = handler(self)
        if isinstance(data, dict) and data.get("transform") == "none":
            del data["transform"]
        if isinstance(data, dict) and data.get("units", "") is None:
            del data["units"]
        return data
