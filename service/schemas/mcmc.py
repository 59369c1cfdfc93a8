"""How each refit samples the GP's hyperparameters (:class:`McmcSettings`), with the defaults of
:data:`worker.vocabulary.defaults.MCMC_DEFAULTS`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic import Strict as StrictValue

from fbgp_al.service.schemas.fields import Strict
from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS


class McmcSettings(Strict):
    """How each refit samples the GP's hyperparameters: by NUTS, and past `laplace_from` labels
    from a Laplace mixture checked by importance sampling. The defaults sample to a target
    (`draws`, `target_rhat`); naming `samples` or `thinning` without `draws` samples that count."""

    chains: int = Field(default=MCMC_DEFAULTS["chains"], ge=1, le=32)
    """NUTS chains per refit."""
    warmup: int = Field(default=MCMC_DEFAULTS["warmup"], ge=0, le=10_000)
    """Warm-up iterations of a cold chain (step size and mass matrix adaptation, Stan's windows)."""
    samples: int = Field(default=MCMC_DEFAULTS["samples"], ge=1, le=10_000)
    """Draws per chain kept after warm-up (sampling to a target: the first round; more follow while
    the target is not met)."""
    thinning: int = Field(default=MCMC_DEFAULTS["thinning"], ge=1)
    """Every `thinning`-th draw is scored by the acquisition (when a count is named)."""
    # start each refit from the previous model's draws, step sizes and mass matrices, with this
    # much step-size warm-up; a refit that does not mix that way is redone cold
    warm_start: bool = MCMC_DEFAULTS["warm_start"]
    """Start each refit from the previous model's last draws, step sizes and mass matrices, with a
    short warm-up (`warm_warmup`); a warm refit that does not mix is redone cold."""
    warm_warmup: int = Field(default=MCMC_DEFAULTS["warm_warmup"], ge=0, le=10_000)
    """Step-size warm-up iterations of a warm-started refit."""
    # where cold chains start: drawn from a coarse posterior grid, or uniformly in [-2, 2] on the
    # log-hyperparameters (Stan's and Pyro's default, which can miss the main mode)
    init: Literal["grid", "uniform"] = MCMC_DEFAULTS["init"]
    """Where cold chains start: `grid`, in the posterior's modes in proportion to their mass;
    `uniform`, uniformly in [-2, 2] on the log-hyperparameters (Stan's and Pyro's start)."""
    # sampling to a target (worker.mcmc): after `samples` draws per chain, more until `draws`
    # draws for scoring are backed by a bulk ESS of at least `draws` (and, when named, a split
    # R-hat of at most `target_rhat`), or until `max_samples` per chain; None (a campaign that
    # names a count, `samples` or `thinning`, and no `draws`): exactly `samples`, every
    # `thinning`-th scored
    draws: int | None = Field(default=MCMC_DEFAULTS["draws"], ge=1, le=10_000)
    """Sampling to a target: draws handed to the acquisition, each hyperparameter's bulk ESS at
    least this many; `null` with `samples` or `thinning` named: exactly that count."""
    target_rhat: float | None = Field(default=MCMC_DEFAULTS["target_rhat"], gt=1.0, le=2.0)
    """Sampling to a target: the largest split R-hat waited for; `null` (the default): R-hat is
    reported in each model's diagnostics, not waited for (a refit whose R-hat is above 1.05
    starts the next one cold)."""
    max_samples: int = Field(default=MCMC_DEFAULTS["max_samples"], ge=1, le=100_000)
    """Sampling to a target: the most draws per chain, whether or not the target is met."""
    # the mass matrix: Stan's diagonal one, or a dense one (Stan's dense_e)
    metric: Literal["diag", "dense"] = MCMC_DEFAULTS["metric"]
    """The mass matrix: `diag` (Stan's diagonal) or `dense` (Stan's dense_e)."""
    # cold chains that start from the posterior's modes (init "grid", two inputs or more) begin
    # their warm-up with their mode's Laplace covariance as their metric, not the identity
    start_metric: bool = MCMC_DEFAULTS["start_metric"]
    """Cold chains started in the posterior's modes begin their warm-up with their mode's Laplace
    covariance as metric, not the identity."""
    # the mode GP's draw: the densest under a KDE of the log-hyperparameters ("kde"), or as the
    # paper's code picks it, under a KDE of bandwidth 0.3 on their raw values ("kde-raw")
    mode_rule: Literal["kde", "kde-raw"] = "kde"
    """How the mode GP's draw is picked: `kde`, the densest under a KDE of the log-hyperparameters;
    `kde-raw`, under a KDE of bandwidth 0.3 on their raw values (the paper's code)."""
    noise_floor: Annotated[float, StrictValue()] = Field(
        default=MCMC_DEFAULTS["noise_floor"], ge=0.0, le=0.1, allow_inf_nan=False
    )
    """The least noise variance the GP may learn, as a fraction of the labels' variance (0 to
    0.1; default 1e-6): the noise is this floor plus a LogNormal(0, sqrt(3)) draw. It keeps a
    deterministic simulator's campaign quick and well mixed; 0 removes it."""

    laplace_from: int | None = Field(default=MCMC_DEFAULTS["laplace_from"], ge=1)
    """From this many labels on, a refit draws the hyperparameters from a Laplace mixture at the
    posterior's modes (warm from the previous model's, searched afresh beside them each time the
    labels have doubled since the last search), corrected by Pareto-smoothed importance
    sampling, instead of NUTS; where the importance ratios' Pareto `k` says the mixture does not
    cover the posterior, that refit samples by NUTS after all (its diagnostics say which). A
    campaign with fidelities draws its model's hyperparameters (every level's, each `rho`) the
    same way. `null`: NUTS at every size (the paper presets). Default 200."""

    @model_validator(mode="after")
    def _keeps_a_draw(self):
        if self.thinning > self.samples:
            raise ValueError("thinning must not exceed samples (no draw would be kept)")
        if "draws" not in self.model_fields_set and {"samples", "thinning"} & self.model_fields_set:
            self.draws = None  # a count was named: sample that count
        if self.draws is not None and self.max_samples < self.samples:
            raise ValueError("max_samples must not be below samples")
        return self
