"""A campaign's pictures (:mod:`worker.views`): a known-noise model is drawn with its labels'
noise."""

from fbgp_al.worker import fitting, views
from fbgp_al.worker.spec.design import GridPool
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
