"""The SDK's :class:`~clients.metamodel.Metamodel` (numpy only) predicts what the service's
``/predict`` computes (``worker.answers.predict``, torch) from the same model, to 1e-10; with
known label noise, what the GP with ``K = Kf + diag(noise_z) + s2 I`` predicts, written out here
in torch; and it refuses malformed inputs and documents with clear errors."""

import io
import json
import math

import numpy as np
import pytest
import torch

from fbgp_al.clients import metamodel, numpy_gp
from fbgp_al.clients.metamodel import Metamodel
from fbgp_al.service.routes.models import export_document
from fbgp_al.worker import answers, gp, sensitivity
from fbgp_al.worker.fitting import prepare
from fbgp_al.worker.mcmc import Posterior, sample_posterior

SPEC_MCMC = {"chains": 2, "warmup": 40, "samples": 40, "thinning": 2}
RTOL = 1e-10


def _campaign(d: int, n: int, f, seed: int, noise=None, nuts: bool = True, transform="none"):
    """A spec, its labels (with ``noise`` variances when given) and a model fitted to them by
    the worker's own functions, as a refit stores it; without ``nuts``, its draws are drawn
    around lengthscales of 0.4 and a noise of 0.01 instead (faster). ``transform``: the
    output's (``log``: modeled on the log scale)."""
    rng = np.random.default_rng(seed)
    inputs = [{"name": f"x{i}", "lower": -1.0 - i, "upper": 2.0 + 3 * i} for i in range(d)]
    lower = np.array([i["lower"] for i in inputs])
    upper = np.array([i["upper"] for i in inputs])
    x = lower + rng.random((n, d)) * (upper - lower)
    y = 40.0 * f(x) + 7.0
    labels = [
        {"x": row.tolist(), "y": float(v), "index": k, "ticket": f"t{k}"}
        for k, (row, v) in enumerate(zip(x, y, strict=True))
    ]
    if noise is not None:
        for label, variance in zip(labels, noise, strict=True):
            label["noise"] = float(variance)
    spec = {
        "name": "unit",
        "inputs": inputs,
        "seed": seed,
        "mcmc": SPEC_MCMC,
        "transform": transform,
    }
    data = prepare(spec, labels)
    if nuts:
        post = sample_posterior(data.u, data.z, 2, 40, 40, seed=seed)
    else:
        draws = np.exp(rng.normal(np.log([0.4] * d + [0.01]), 0.3, (80, d + 1)))
        post = Posterior(
            torch.from_numpy(draws[:, :d]),
            torch.from_numpy(draws[:, d]),
            2,
            torch.from_numpy(draws[0, :d]),
            float(draws[0, d]),
        )
    model = {
        "version": n,
        "n_labeled": n,
        **post.to_dict(),
        "acquisition_samples": post.thinned(2).to_dict()["samples"],
        "transform": {**data.space.transform(), **data.scale_y.to_dict()},
        "diagnostics": {"max_rhat": 1.0},
    }
    return spec, labels, model, lower, upper


def _points(lower, upper, labels, m: int, seed: int) -> np.ndarray:
    """The labeled inputs, random points of the box and its corners (far from most labels)."""
    rng = np.random.default_rng(seed + 100)
    d = len(lower)
    corners = np.array(np.meshgrid(*[[0.0, 1.0]] * d)).reshape(d, -1).T
    unit = np.concatenate([rng.random((m, d)), corners])
    return np.concatenate(
        [np.array([label["x"] for label in labels]), lower + unit * (upper - lower)]
    )


def _assert_same(got: dict, want: dict, y_std: float) -> None:
    for key, scale in (
        ("mean", y_std),
        ("variance", y_std**2),
        ("mixture_mean", y_std),
        ("mixture_variance", y_std**2),
    ):
        assert isinstance(got[key], np.ndarray) and got[key].dtype == np.float64
        np.testing.assert_allclose(
            got[key], np.asarray(want[key]), rtol=RTOL, atol=RTOL * scale, err_msg=key
        )


@pytest.mark.parametrize(
    ("d", "n", "f"),
    [
        (1, 9, lambda x: np.sin(3 * x[:, 0])),
        (2, 24, lambda x: np.sin(2 * x[:, 0]) + 0.1 * x[:, 1] ** 2),
    ],
)
def test_predictions_equal_the_service_s(d, n, f):
    spec, labels, model, lower, upper = _campaign(d, n, f, seed=d)
    labels_later = labels + [{"x": labels[0]["x"], "y": 1e6}]  # a label the model did not see
    document = json.loads(json.dumps(export_document("c1", spec, model, labels_later, 0.0)))
    assert document["data"]["y"] == [label["y"] for label in labels]
    assert "noise" not in document["data"]
    mm = Metamodel.load(document)
    assert (mm.n_labeled, mm.version, mm.inputs) == (n, n, spec["inputs"])
    x = _points(lower, upper, labels, 40, seed=d)
    got = mm.predict(x)
    want = answers.predict(spec, model, labels, x.tolist())
    _assert_same(got, want, model["transform"]["y_std"])
    # the mixture differs from the mode GP: the draws were used, not the mode's alone
    assert not np.allclose(got["mixture_variance"], got["variance"], rtol=1e-6)
    # one point, flat, and an empty batch
    one = mm.predict(x[-1] if d > 1 else x[-1:, 0])
    assert one["mean"].shape == (1,) and one["mean"][0] == pytest.approx(got["mean"][-1], 1e-12)
    assert mm.predict(np.empty((0, d)))["variance"].shape == (0,)


def test_groups_of_draws_and_blocks_of_points_change_nothing(monkeypatch):
    """With the draws' GPs fitted in groups and the points taken a few at a time (as for many
    labels, draws and points), the answers are those of one fit and one block."""
    spec, labels, model, lower, upper = _campaign(
        2, 12, lambda x: np.cos(x[:, 0]) * x[:, 1], 4, nuts=False
    )
    document = export_document("c4", spec, model, labels, 0.0)
    x = _points(lower, upper, labels, 25, seed=4)
    whole = Metamodel.load(document).predict(x)
    monkeypatch.setattr(numpy_gp, "FIT_ELEMENTS", 3 * 12**2)  # groups of 3 draws
    monkeypatch.setattr(metamodel, "BLOCK_ELEMENTS", 7 * len(model["acquisition_samples"]["noise"]))
    monkeypatch.setattr(numpy_gp, "CHUNK_ELEMENTS", 2 * 12)  # the mode's GP: 2 points a chunk
    parts = Metamodel.load(document).predict(x)
    for key in whole:
        np.testing.assert_allclose(parts[key], whole[key], rtol=1e-12, err_msg=key)
    _assert_same(
        parts, answers.predict(spec, model, labels, x.tolist()), model["transform"]["y_std"]
    )


def _gp_with_known_noise(u, z, noise_z, lengthscale, s2, cand):
    """The predictive mean and variance of z of the GP with ``K = Kf + diag(noise_z) + s2 I``,
    written out (squared distances, Cholesky, two triangular solves): ``B x m`` each."""
    lengthscale = torch.as_tensor(lengthscale, dtype=torch.float64)
    u, cand = torch.as_tensor(u), torch.as_tensor(cand)
    z, noise_z = torch.as_tensor(z), torch.as_tensor(noise_z)
    s2 = torch.as_tensor(s2, dtype=torch.float64)
    means, variances = [], []

    def kern(a, b, ls):
        return torch.exp(-0.5 * torch.cdist(a / ls, b / ls) ** 2)

    for ls, s in zip(lengthscale, s2, strict=True):
        K = kern(u, u, ls) + torch.diag(noise_z) + s * torch.eye(len(z), dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        k_star = kern(u, cand, ls)
        alpha = torch.cholesky_solve(z[:, None], L)[:, 0]
        v = torch.linalg.solve_triangular(L, k_star, upper=False)
        means.append(k_star.T @ alpha)
        variances.append(1.0 - (v * v).sum(0) + s)
    return torch.stack(means).numpy(), torch.stack(variances).numpy()


def test_known_label_noise_enters_the_covariance_of_the_labels():
    rng = np.random.default_rng(7)
    n = 14
    noise = rng.uniform(0.0, 4.0, n)  # original units: y's scale is about 40
    noise[3] = 0.0
    spec, labels, model, lower, upper = _campaign(
        2, n, lambda x: np.cos(x[:, 0]) + 0.2 * x[:, 1], seed=5, noise=noise, nuts=False
    )
    document = export_document("c2", spec, model, labels, 0.0)
    assert document["data"]["noise"] == noise.tolist()
    mm = Metamodel.load(json.loads(json.dumps(document)))
    x = _points(lower, upper, labels, 30, seed=5)
    got = mm.predict(x)

    t = model["transform"]
    u = (np.array(document["data"]["x"]) - lower) / (upper - lower)
    z = (np.array(document["data"]["y"]) - t["y_mean"]) / t["y_std"]
    cand = (x - lower) / (upper - lower)
    noise_z = noise / t["y_std"] ** 2
    mode_mean, mode_var = _gp_with_known_noise(
        u, z, noise_z, [model["mode"]["lengthscale"]], [model["mode"]["noise"]], cand
    )
    draws = model["acquisition_samples"]
    means, variances = _gp_with_known_noise(
        u, z, noise_z, draws["lengthscale"], draws["noise"], cand
    )
    want = {
        "mean": t["y_mean"] + t["y_std"] * mode_mean[0],
        "variance": t["y_std"] ** 2 * mode_var[0],
        "mixture_mean": t["y_mean"] + t["y_std"] * means.mean(0),
        "mixture_variance": t["y_std"] ** 2 * (variances.mean(0) + means.var(0)),
    }
    _assert_same(got, want, t["y_std"])
    # the noise mattered: without it the same model predicts otherwise at the labels
    del document["data"]["noise"]
    plain = Metamodel.load(document).predict(x[:n])
    assert np.max(np.abs(plain["mean"] - got["mean"][:n])) > 1e-3 * t["y_std"]
    # and zero noise is the same as none
    document["data"]["noise"] = [0.0] * n
    zero = Metamodel.load(document).predict(x[:n])
    np.testing.assert_allclose(zero["variance"], plain["variance"], rtol=1e-14)


def test_a_failed_cholesky_gets_the_worker_s_jitter():
    assert numpy_gp.JITTERS == gp.JITTERS
    u = np.array([[0.1], [0.1], [0.1], [0.5]])  # repeated inputs, no nugget: singular
    ls = np.array([[0.3]])
    K = numpy_gp.rbf(u, u, ls)
    K -= 5e-7 * np.eye(4)  # indefinite by a little: a jitter of 1e-6 is the first to help
    chol = numpy_gp.cholesky(K)
    factor = gp.cholesky(torch.as_tensor(K))
    np.testing.assert_allclose(chol, factor.chol.numpy(), rtol=1e-9, atol=1e-12)
    jitter = float(factor.jitter[0])
    assert jitter == 1e-6
    np.testing.assert_allclose(chol[0] @ chol[0].T, K[0] + jitter * np.eye(4), atol=1e-12)
    nan = numpy_gp.cholesky(np.full((1, 2, 2), np.nan))  # nothing helps: the identity
    np.testing.assert_array_equal(nan[0], np.eye(2))


@pytest.fixture(scope="module")
def document():
    spec, labels, model, _, _ = _campaign(2, 8, lambda x: x[:, 0] * x[:, 1], seed=3, nuts=False)
    return json.loads(json.dumps(export_document("c3", spec, model, labels, 1.0)))


def test_load_takes_a_path_a_file_or_the_document(document, tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document))
    x = [[0.0, 1.0], [1.5, 4.0]]
    want = Metamodel.load(document).predict(x)
    with open(path, "rb") as binary:
        for source in (path, str(path), binary, io.StringIO(json.dumps(document))):
            got = Metamodel.load(source).predict(x)
            assert all(np.array_equal(got[k], want[k]) for k in want)
    with pytest.raises(TypeError, match="a path, a file or a dict"):
        Metamodel.load(3)


def test_points_may_name_their_inputs(document):
    model = Metamodel.load(document)
    want = model.predict([[0.0, 1.0], [1.5, 4.0]])
    got = model.predict([{"x1": 1.0, "x0": 0.0}, [1.5, 4.0]])
    assert all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize(
    ("x", "message"),
    [
        ([[0.0, 1.0, 2.0]], r"x must be m x 2 \(inputs x0, x1\)"),
        ([0.5], r"x must be m x 2"),
        ([[[0.0, 1.0]]], r"x must be m x 2"),
        ([[0.0, 1.0], [math.nan, 1.0]], "point 1 of x is not finite"),
        ([[0.0, math.inf]], "point 0 of x is not finite"),
        ([["a", 1.0]], "x must be numbers"),
        ([{"x0": 0.0}], r"x: point 0 lacks x1 \(inputs: x0, x1\)"),
        ([{"x0": 0.0, "x1": 1.0, "x2": 0.0}], "x: point 0 names no input of the campaign: x2"),
    ],
)
def test_bad_inputs_are_refused_with_a_clear_message(document, x, message):
    with pytest.raises(ValueError, match=message):
        Metamodel.load(document).predict(x)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "something"}, "not an exported model"),
        ({"format_version": 2}, "format_version 2 is not one this SDK reads"),
        ({"kernel": "matern52"}, "kernel 'matern52'"),
        (
            {"n_labeled": 9},
            "the document holds 8 inputs and 8 outputs; its model saw n_labeled = 9",
        ),
        ({"mode": {"lengthscale": [1.0, -1.0], "noise": 0.1}}, "mode need finite lengthscales"),
        (
            {"acquisition_samples": {"lengthscale": [[1.0, 1.0]], "noise": [math.nan]}},
            "acquisition_samples need finite",
        ),
        ({"transform": {"lower": [0.0], "upper": [1.0], "y_mean": 0, "y_std": 1}}, "dimension"),
        (
            {"data": {"x": [[0.0, 1.0, 2.0]] * 8, "y": [1.0] * 8}},
            r"data.x is \(8, 3\), not 8 points",
        ),
        ({"data": {"y": [1.0] * 8}}, "the document lacks 'x'"),
        ({"mode": None}, "the document is malformed"),
    ],
)
def test_a_malformed_document_is_refused(document, change, message):
    with pytest.raises(ValueError, match=message):
        Metamodel.load(dict(document, **change))


def test_a_log_outputs_document_predicts_as_the_service_does_and_says_so():
    """An output modeled on the log scale: the document is ``format_version`` 3 (a reader that
    predates output transforms refuses it, rather than read log y as y), carries
    ``y_transform``, and predicts ``/predict``'s ten arrays; a log document with a label <= 0,
    an unknown ``y_transform`` or a later version is refused."""
    spec, labels, model, lower, upper = _campaign(
        2, 10, lambda x: np.exp(x[:, 0]), seed=4, nuts=False, transform="log"
    )
    document = json.loads(json.dumps(export_document("c4", spec, model, labels, 1.0)))
    assert document["format_version"] == 3 and document["transform"]["y_transform"] == "log"
    x = _points(lower, upper, labels, 20, seed=4)
    want = answers.predict(spec, model, labels, x.tolist())
    got = Metamodel.load(document).predict(x)
    assert set(got) == set(want) and len(want) == 10
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=RTOL, err_msg=key)
    bad_y = dict(document["data"], y=[-1.0] + document["data"]["y"][1:])
    for change, message in (
        ({"data": bad_y}, "data.y must be > 0"),
        (
            {"transform": dict(document["transform"], y_transform="sqrt")},
            "y_transform 'sqrt' is unknown",
        ),
        ({"format_version": 4}, "format_version 4 is not one"),
    ):
        with pytest.raises(ValueError, match=message):
            Metamodel.load(dict(document, **change))
    spec, labels, model, _, _ = _campaign(2, 8, lambda x: x[:, 0], seed=3, nuts=False)
    assert export_document("c3", spec, model, labels, 1.0)["format_version"] == 1  # as before


def test_each_gp_is_factorized_once_per_load(document, monkeypatch):
    """The mode's and the draws' factors are made at the first prediction and kept: later
    predictions factorize nothing (they took 24 to 240 s each at 1,000 to 2,000 labels when
    every call factorized the draws again)."""
    calls = []
    real = numpy_gp.cholesky
    monkeypatch.setattr(numpy_gp, "cholesky", lambda K: calls.append(len(K)) or real(K))
    monkeypatch.setattr(numpy_gp, "FIT_ELEMENTS", 3 * 8**2)  # the draws in groups of 3
    model = Metamodel.load(document)
    assert calls == []  # loading factorizes nothing
    first = model.predict([[0.5, 2.0]])
    draws = len(document["acquisition_samples"]["noise"])
    assert sum(calls) == draws + 1 and max(calls) <= 3
    calls.clear()
    again = model.predict([[0.5, 2.0]])
    assert calls == [] and again["mixture_mean"][0] == first["mixture_mean"][0]


def test_a_model_over_the_memory_budget_is_refused_with_what_it_needs(document):
    draws = len(document["acquisition_samples"]["noise"])
    need = Metamodel.load(document).memory
    assert need == (draws + 1) * 8 * 8 * 8 + (draws + 1) * 8 * 8 * 8 * 3  # n = 8 labels
    with pytest.raises(ValueError, match=r"needs 0\.00 GiB .* over the budget .* draws="):
        Metamodel.load(document, memory=need - 1)
    fewer = Metamodel.load(document, memory=need - 1, draws=draws // 2)
    assert len(fewer.draw_noise) == draws // 2 and fewer.memory < need
    whole = Metamodel.load(document).predict([[0.5, 2.0]])
    assert fewer.predict([[0.5, 2.0]])["mean"][0] == whole["mean"][0]  # the mode is the mode
    with pytest.raises(ValueError, match="draws must be an integer"):
        Metamodel.load(document, draws=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["transform"].update(y_std=1e-300), "does not standardize its labels"),
        (
            lambda d: d["data"].update(y=[str(v) for v in d["data"]["y"]]),
            "must hold numbers, not str",
        ),
        (lambda d: d["transform"].update(y_mean="0.5"), "must hold numbers, not str"),
        (lambda d: d["mode"].update(noise=True), "must hold numbers, not bool"),
        (lambda d: d["acquisition_samples"].update(noise=[[[0.1]]]), "nested deeper"),
    ],
)
def test_numbers_that_are_not_numbers_or_do_not_fit_are_refused(document, change, message):
    bad = json.loads(json.dumps(document))
    change(bad)
    with pytest.raises(ValueError, match=message):
        Metamodel.load(bad)


def test_a_document_nested_too_deeply_for_the_parser_is_a_value_error():
    deep = io.StringIO("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        Metamodel.load(deep)


@pytest.mark.parametrize("method", ["closed-form", "monte-carlo"])
def test_sensitivity_equals_the_service_s(method):
    """The exported model's Sobol indices are those ``GET .../sensitivity`` computes
    (:func:`worker.sensitivity.sensitivity_outputs`, its draws' weights solved in torch) from
    the same model: every index, bound and the variance, to 1e-9."""
    spec, labels, model, _, _ = _campaign(
        3, 30, lambda x: np.sin(x[:, 0]) + 0.2 * x[:, 1] ** 2, seed=5, nuts=False
    )
    document = json.loads(json.dumps(export_document("c5", spec, model, labels, 0.0)))
    got = Metamodel.load(document).sensitivity(method=method, level=0.9, samples=512, seed=2)
    want = sensitivity.sensitivity_outputs(
        spec, model, labels, method=method, level=0.9, samples=512, seed=2
    )
    assert got.pop("model_version") == 30
    assert got.keys() == want.keys() and got["inputs"] == ["x0", "x1", "x2"]
    draws = len(model["acquisition_samples"]["noise"])
    assert (got["draws"], got["level"], got["method"]) == (draws, 0.9, method) and draws > 1
    for key in ("first", "total", "variance"):
        for bound, values in want[key].items():
            np.testing.assert_allclose(got[key][bound], values, rtol=1e-9, atol=1e-12)
    # x2 does not enter the function: its total index is near 0, x0's far from it
    assert got["total"]["mean"][2] < 0.05 < got["total"]["mean"][0]


def test_sensitivity_refuses_an_unknown_method_or_level(document):
    mm = Metamodel.load(document)
    with pytest.raises(ValueError, match="method 'fast'"):
        mm.sensitivity(method="fast")
    with pytest.raises(ValueError, match="level"):
        mm.sensitivity(level=1.0)


@pytest.mark.parametrize("log", [True, False])
def test_the_fast_predictions_equal_the_computation_before_to_1e_10(log, monkeypatch):
    """A two-output model of four typed inputs with a failure model (the speed benchmark's,
    smaller): the kernel and ``[alpha'; L^-1] k*`` in one product per chunk of candidates, and
    the log outputs' mixture quantiles by Halley's steps, give what the separate products and
    Newton's steps gave, to 1e-10 (relative, absolute below 1), chunked or not."""
    from fbgp_al.clients.reproduction import metamodel_speed as speed

    document = speed.document(draws=40, labels=25, log=log, seed=2)
    x = speed.points(300, seed=3)
    model = Metamodel.load(document)
    fast = model.predict(x)
    before = speed.predict_before(model, x)
    monkeypatch.setattr(numpy_gp, "CHUNK_ELEMENTS", 40 * 25 * 7)  # 7 candidates a chunk
    chunked = Metamodel.load(document).predict(x)
    assert set(fast) == {"o1", "o2"} and len(fast["o1"]) == (10 if log else 4) + 1
    for name in fast:
        for key in before[name]:
            want = np.asarray(before[name][key])
            for got in (fast[name][key], chunked[name][key]):
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=key)
