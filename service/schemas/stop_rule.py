"""A campaign's stopping rule (targets for the model's accuracy estimates, judged by
:mod:`service.stopping`), the target met once one is, and ``/resume``'s body."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator
from pydantic import Strict as StrictValue

from fbgp_al.service.schemas.fields import Body, Strict
from fbgp_al.worker.vocabulary.defaults import STOP_PATIENCE, STOP_TARGETS

Threshold = Annotated[float, StrictValue(), Field(gt=0, allow_inf_nan=False)]


class StopRule(Strict):
    """A campaign's stopping rule: it is done once any target is met (the model's ``accuracy``
    value at or below it) on ``patience`` consecutive models, each of at least ``min_labels``
    labels (default: the initial design's size + 1). ``loo_rmse`` in the output's units,
    ``ipv``, ``ipv_f`` and ``qbc`` in its units squared; the ``..._relative`` ones relative to the
    labels' standard deviation (``loo_rmse``) or variance."""

    loo_rmse: Threshold | None = None
    """Target for the leave-one-out RMSE of the mixture, in the output's units."""
    loo_rmse_relative: Threshold | None = None
    """Target for the leave-one-out RMSE over the labels' standard deviation (a fraction)."""
    ipv: Threshold | None = None
    """Target for the mixture's predictive variance of y averaged over the pool, in the output's
    units squared."""
    ipv_relative: Threshold | None = None
    """Target for `ipv` over the labels' variance (a fraction)."""
    ipv_f: Threshold | None = None
    """Target for the predictive variance of the latent f (no noise) averaged over the pool, in the
    output's units squared."""
    ipv_f_relative: Threshold | None = None
    """Target for `ipv_f` over the labels' variance (a fraction)."""
    qbc: Threshold | None = None
    """Target for the variance of the draws' means averaged over the pool (B-QBC's score), in the
    output's units squared."""
    qbc_relative: Threshold | None = None
    """Target for `qbc` over the labels' variance (a fraction)."""
    min_labels: int | None = Field(default=None, ge=1, le=1_000_000)
    """Models with fewer labels never stop the campaign (default: the initial design's size + 1)."""
    patience: int = Field(default=STOP_PATIENCE, ge=1, le=1000)
    """Consecutive models that must meet a target."""

    @model_validator(mode="after")
    def _has_a_target(self):
        if all(getattr(self, name) is None for name in STOP_TARGETS):
            names = ", ".join(STOP_TARGETS)
            raise ValueError(f"a stopping rule needs at least one target: {names}")
        return self


def check_stop(stop: StopRule | None, max_labels: int) -> None:
    """Raise ValueError if the rule's ``min_labels`` exceeds ``max_labels`` (it could never
    stop the campaign)."""
    if stop is not None and stop.min_labels is not None and stop.min_labels > max_labels:
        raise ValueError(f"stop.min_labels ({stop.min_labels}) exceeds max_labels ({max_labels})")


class StoppedBy(Body):
    """The stopping rule's target that was met: its ``value`` at model ``version`` (at or below
    ``target`` on ``patience`` consecutive models), and when (unix seconds)."""

    rule: str
    """The target met (`loo_rmse`, `qbc_relative`, ...)."""
    value: float
    """Its value at the model that stopped the campaign."""
    target: float
    """The threshold it met."""
    version: int
    """The model's version."""
    at: float
    """When, unix seconds."""


class Resume(Strict):
    """``POST /campaigns/{id}/resume``: optionally a new stopping rule (``null``: none)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"stop": {"qbc_relative": 0.01, "patience": 3}}]}
    )

    stop: StopRule | None = None
    """A new stopping rule; `null` removes it; absent keeps the rule."""
