"""A campaign's pictures (:mod:`worker.views`): a known-noise model is drawn with its labels'
noise."""

from fbgp_al.worker import fitting, views
from fbgp_al.worker.vocabulary.design import GridPool
from tests.worker.known_noise import SPEC
from tests.worker.known_noise import labels as _labels


def test_the_campaign_page_draws_a_known_noise_model():
    """The page's plots of a known-noise model: the labels with their noise as error bars."""
    x, y, noise = [1.0, 3.0, 4.5, 6.0, 8.5], [0.3, 1.2, -0.4, 0.8, -1.0], [0.5, 0.0, 0.2, 1, 0.1]
    labels = _labels(x, y, noise)
    spec = dict(SPEC, mcmc={"chains": 2, "warmup": 8, "samples": 6, "thinning": 2})
    model, _ = fitting.fit(spec, GridPool(dim=1, points_per_dim=51), labels, exclude=set())
    for png in (views.model_png(spec, model, labels), views.posterior_png(spec, model)):
        assert png.startswith(b"\x89PNG")


def test_the_accuracy_is_drawn_per_output_in_its_own_units():
    """Several outputs: a row per output from each model's own estimates; a history of models
    with only the worst estimates over the outputs (kept before each output's were) has none
    to draw, rather than one axis for outputs of different units."""
    spec = {"outputs": [{"name": "stress", "units": "MPa"}, {"name": "disp"}]}
    one = {
        "loo_rmse": 2.0,
        "ipv": 4.0,
        "ipv_f": 3.0,
        "qbc": 0.5,
        "loo_rmse_relative": 0.1,
        "ipv_relative": 0.01,
        "ipv_f_relative": 0.01,
        "qbc_relative": 0.001,
    }
    worst = [{"event": "model", "version": v, "accuracy": one} for v in (3, 4)]
    assert views.accuracy_png(worst, spec) is None
    each = [
        dict(e, outputs={"stress": one, "disp": {k: v / 1000 for k, v in one.items()}})
        for e in worst
    ]
    assert views.accuracy_png(each, spec).startswith(b"\x89PNG")
    assert views.accuracy_png(worst, {}).startswith(b"\x89PNG")  # one output: its own


def test_an_error_that_spans_decades_is_drawn_on_a_log_axis(monkeypatch):
    """The learning curve's RMSE and the LOO RMSE on a log axis when, all positive, they span
    more than two decades (5e12 at 3 labels would lay the rest flat on zero); on a linear one
    otherwise, and the NLML (which may be negative) always."""
    monkeypatch.setattr(views, "_png", lambda fig: fig)  # the figure, not its PNG
    rmse = [5e12, 40.0, 3.0, 0.5]
    history = [
        {"event": "evaluate", "n_labeled": n, "nlml": nlml, "rmse": r}
        for n, nlml, r in zip((3, 10, 20, 30), (9.0, 1.0, -0.5, -1.0), rmse, strict=True)
    ]
    nlml, error = views.curve_png(history).axes
    assert error.get_yscale() == "log" and nlml.get_yscale() == "linear"
    close = [dict(e, rmse=r) for e, r in zip(history, (4.0, 3.0, 2.0, 0.5), strict=True)]
    assert views.curve_png(close).axes[1].get_yscale() == "linear"
    one = {"ipv": 4.0, "ipv_f": 3.0, "qbc": 0.5}
    models = [
        {"event": "model", "version": n, "accuracy": dict(one, loo_rmse=r)}
        for n, r in zip((3, 10, 20, 30), rmse, strict=True)
    ]
    loo = views.accuracy_png(models, {}).axes[0]
    assert loo.get_yscale() == "log"


def test_the_two_input_model_hatches_what_the_constraints_rule_out(monkeypatch):
    """Over two inputs with the constraint ``x1 + x2 <= 1``, the model is drawn only where the
    constraint holds (its values masked beyond), the rest hatched and said so in the titles."""
    monkeypatch.setattr(views, "_png", lambda fig: fig)
    inputs = [
        {"name": "x1", "lower": 0.0, "upper": 1.0},
        {"name": "x2", "lower": 0.0, "upper": 1.0},
    ]
    spec = {
        "inputs": inputs,
        "constraints": ["x1 + x2 <= 1"],
        "pool": {"type": "grid", "points_per_dim": 11},
        "pool_subsample": 121,
        "acquisition": "alm",
        "mcmc": {"chains": 2, "warmup": 8, "samples": 6, "thinning": 2},
        "seed": 3,
    }
    x = [[0.0, 0.0], [0.5, 0.1], [0.1, 0.7], [0.4, 0.4], [0.9, 0.05]]
    labels = [{"x": p, "y": p[0] - 2 * p[1], "index": None, "ticket": None} for p in x]
    model, _ = fitting.fit(spec, GridPool(dim=2, points_per_dim=11), labels, exclude=set())
    fig = views.model_png(spec, model, labels)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 2 and all("hatched: ruled out" in ax.get_title() for ax in panels)
    for ax in panels:
        hatched = [c for c in ax.collections if getattr(c, "hatches", None) == ["//"]]
        assert len(hatched) == 1
        drawn = ax.collections[0]  # the model's filled contours: none beyond x1 + x2 = 1
        assert not any(path.contains_point((0.9, 0.9)) for path in drawn.get_paths())
        assert any(path.contains_point((0.2, 0.2)) for path in drawn.get_paths())
    free = dict(spec, constraints=[])
    fig = views.model_png(free, model, labels)
    assert not any("hatched" in ax.get_title() for ax in fig.axes)
    assert any(p.contains_point((0.9, 0.9)) for p in fig.axes[0].collections[0].get_paths())
