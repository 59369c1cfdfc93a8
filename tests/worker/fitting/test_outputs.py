"""A multi-output refit's parts (:mod:`worker.fitting.outputs`): each output's single-output
campaign and labels in its own GP's units, its warm start, and the refit's summary over its
outputs (the worst R-hat, ESS and accuracy: a target is met when every output meets it)."""

import numpy as np
import pytest

from fbgp_al.worker.fitting.outputs import (
    output_warm_start,
    prepare_outputs,
    summary_diagnostics,
    worst_accuracy,
)
from fbgp_al.worker.fitting.posteriors import prepare

SPEC = {
    "inputs": [{"name": "a", "lower": 0.0, "upper": 1.0}],
    "seed": 2**32 - 1,
    "mcmc": {"chains": 2, "samples": 20, "thinning": 2},
    "outputs": [{"name": "s", "weight": 2.0}, {"name": "t", "transform": "log"}],
}
LABELS = [
    {"x": [0.1], "y": {"s": 1.0, "t": 10.0}},
    {"x": [0.5], "y": {"s": -3.0, "t": 1000.0}},
    {"x": [0.9], "y": {"s": 2.0, "t": 100.0}},
]


def test_each_output_is_its_own_single_output_campaign():
    (s, ws, single_s, data_s), (t, wt, single_t, data_t) = prepare_outputs(SPEC, LABELS)
    assert (s, ws, t, wt) == ("s", 2.0, "t", 1.0)
    assert single_s["seed"] == 2**32 - 1 and single_t["seed"] == 0  # (seed + k) mod 2^32
    assert "outputs" not in single_s and single_t["transform"] == "log"
    alone = prepare({**single_s}, [{"x": lb["x"], "y": lb["y"]["s"]} for lb in LABELS])
    np.testing.assert_array_equal(data_s.z.numpy(), alone.z.numpy())
    log_t = np.log([10.0, 1000.0, 100.0])
    np.testing.assert_allclose(data_t.z.numpy(), (log_t - log_t.mean()) / log_t.std(ddof=1))
    assert data_s.seed != data_t.seed


def test_each_output_warm_starts_from_its_own_adaptation():
    previous = {"outputs": {"s": {"adaptation": {"last": [[1.0]]}}, "t": {}}}
    assert output_warm_start(SPEC, previous, "s") is None  # warm starts not asked for
    warm = {**SPEC, "mcmc": {**SPEC["mcmc"], "warm_start": True}}
    assert output_warm_start(warm, previous, "s") == {"last": [[1.0]]}
    assert output_warm_start(warm, previous, "t") is None
    assert output_warm_start(warm, {"version": 3}, "s") is None  # a single-output model's


def test_the_summary_is_the_worst_over_the_outputs():
    outputs = {
        "s": {
            "diagnostics": {
                "max_rhat": 1.01,
                "min_ess_bulk": 300,
                "divergences": 1,
                "warm_start": "warm",
            }
        },
        "t": {
            "diagnostics": {
                "max_rhat": 1.04,
                "min_ess_bulk": 120,
                "divergences": 2,
                "warm_start": "cold",
            }
        },
        "u": {
            "diagnostics": {
                "max_rhat": None,
                "min_ess_bulk": None,
                "divergences": 0,
                "warm_start": "warm",
            }
        },  # a Laplace mixture's: no chains
    }
    d = summary_diagnostics(outputs, 12.5, 7)
    assert (d["max_rhat"], d["min_ess_bulk"], d["divergences"]) == (1.04, 120, 3)
    assert d["warm_start"] == "cold; warm" and d["refit_seconds"] == 12.5 and d["seed"] == 7
    none = summary_diagnostics({"u": outputs["u"]}, 1.0, 0)
    assert none["max_rhat"] is None and none["min_ess_bulk"] is None


def test_the_accuracy_a_stopping_rule_reads_is_the_worst_output_s():
    got = worst_accuracy(
        [{"loo_rmse": 0.2, "ipv": 0.01, "unrelated": 5.0}, {"loo_rmse": 0.5, "ipv": None}]
    )
    assert got == {"loo_rmse": pytest.approx(0.5)}  # ipv unknown for one output: not stated
    assert worst_accuracy([{"loo_rmse": 0.3}]) == {"loo_rmse": 0.3}
