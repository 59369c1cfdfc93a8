"""Several outputs as math: each output's seed, standardization and posterior are its
single-output campaign's; the acquisition is the weighted sum of each output's scores; a model
and its answers cover every output."""

import numpy as np
import pytest
import torch

from fbgp_al.worker import answers, fitting, scoring
from fbgp_al.worker.acquisition import evaluate
from fbgp_al.worker.vocabulary.defaults import STOP_TARGETS, output_labels, output_spec
from fbgp_al.worker.vocabulary.design import GridPool

SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 10.0}],
    "pool": {"type": "grid", "points_per_dim": 51},
    "pool_subsample": 40,
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 20, "samples": 10, "thinning": 2},
    "seed": 7,
    "outputs": [{"name": "stress", "weight": 3.0}, {"name": "disp"}],
}
X = [0.5, 2.0, 3.5, 6.0, 8.5]


def _labels():
    return [
        {
            "x": [x],
            "y": {"stress": 1e5 * np.sin(x), "disp": 1e-4 * x**2},
            "index": None,
            "ticket": None,
        }
        for x in X
    ]


def test_output_k_has_the_seed_of_its_single_output_campaign():
    labels = _labels()
    parts = fitting.prepare_outputs(SPEC, labels)
    single = {k: v for k, v in SPEC.items() if k != "outputs"}
    # output 0's seed is the campaign's own: a single-output campaign's on the same labels
    assert parts[0][3].seed == fitting.prepare(single, output_labels(labels, "stress")).seed
    for k, (_, weight, spec, data) in enumerate(parts):
        assert spec["seed"] == SPEC["seed"] + k and "outputs" not in spec
        assert weight == (3.0 if k == 0 else 1.0)
        assert data.seed == (((SPEC["seed"] + k) * 1_000_003 + len(labels)) % 2**32)
    assert parts[0][3].seed != parts[1][3].seed
    assert output_spec(dict(SPEC, seed=2**32 - 1), 1)["seed"] == 0


def test_each_output_is_standardized_on_its_own():
    for name, _, _, data in fitting.prepare_outputs(SPEC, _labels()):
        values = np.array([label["y"][name] for label in _labels()])
        assert data.scale_y.mean == pytest.approx(values.mean(), rel=1e-12)
        assert data.scale_y.std == pytest.approx(values.std(ddof=1), rel=1e-12)
        assert float(data.z.mean()) == pytest.approx(0.0, abs=1e-12)
        assert float(data.z.std()) == pytest.approx(1.0, rel=1e-12)


def test_each_posterior_is_its_single_output_campaigns():
    labels = _labels()
    fits = fitting.fit_outputs(SPEC, labels)
    for k, fit in enumerate(fits):
        spec = output_spec(SPEC, k)
        data = fitting.prepare(spec, output_labels(labels, fit.name))
        alone = fitting.posterior(spec, data, None)
        assert torch.equal(fit.post.lengthscale, alone.lengthscale)
        assert torch.equal(fit.post.noise, alone.noise)
        assert torch.equal(fit.post.mode_lengthscale, alone.mode_lengthscale)
    assert not torch.equal(fits[0].post.noise, fits[1].post.noise)


@pytest.mark.parametrize("name", ["qb-mgp", "b-qbc", "alm", "bald"])
def test_the_combined_score_is_the_weighted_sum_of_each_outputs(name):
    fits = fitting.fit_outputs(SPEC, _labels())
    candidates = torch.linspace(0, 1, 30, dtype=torch.float64)[:, None]
    parts = [(f.weight, f.post.thinned(2), f.data) for f in fits]
    combined = scoring.combined_scores(name, parts, candidates)
    direct = sum(w * evaluate(name, t, d.u, d.z, candidates, seed=d.seed) for w, t, d in parts)
    torch.testing.assert_close(combined, direct, rtol=1e-14, atol=0)
    # in standardized units: the outputs' scales (1e5 and 1e-4) do not weigh
    each = [evaluate(name, t, d.u, d.z, candidates, seed=d.seed) for _, t, d in parts]
    assert 1e-3 < float(each[0].abs().max() / each[1].abs().max()) < 1e3
    random = scoring.combined_scores("random", parts, candidates)
    d0 = parts[0][2]
    torch.testing.assert_close(
        random, evaluate("random", parts[0][1], d0.u, d0.z, candidates, seed=d0.seed)
    )


def test_a_model_and_its_answers_cover_every_output():
    labels = _labels()
    fits = fitting.fit_outputs(SPEC, labels)
    pool = GridPool(dim=1, points_per_dim=51)
    model, ranking = fitting.multi_model_and_ranking(SPEC, pool, fits, set(), [], 0.0)
    assert list(model["outputs"]) == ["stress", "disp"] and len(ranking) > 0
    scores = [r["score"] for r in ranking]
    assert scores == sorted(scores, reverse=True)
    x = [[1.0], [4.0], [9.0]]
    a = answers.acquisition_outputs(SPEC, model, labels, x, "qb-mgp")
    np.testing.assert_allclose(
        a["values"],
        3.0 * np.array(a["outputs"]["stress"]) + np.array(a["outputs"]["disp"]),
        rtol=1e-14,
    )
    p = answers.predict_outputs(SPEC, model, labels, x)
    for k, name in enumerate(("stress", "disp")):
        alone = answers.predict(
            output_spec(SPEC, k), answers.output_model(model, name), output_labels(labels, name), x
        )
        assert p["outputs"][name] == alone
    # each in its own units
    assert 1e3 < max(abs(v) for v in p["outputs"]["stress"]["mean"]) < 1e6
    assert 1e-6 < max(abs(v) for v in p["outputs"]["disp"]["mean"]) < 1e-1
    # the model's accuracy is each estimate's worst over the outputs
    for key in STOP_TARGETS:
        assert model["accuracy"][key] == max(o["accuracy"][key] for o in model["outputs"].values())
