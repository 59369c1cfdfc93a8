"""A campaign's pictures (:mod:`worker.views`): a known-noise model is drawn with its labels'
noise."""

from tests.worker.known_noise import SPEC
from tests.worker.known_noise import labels as _labels
from worker import fitting, views
from worker.spec.design import GridPool


def test_the_campaign_page_draws_a_known_noise_model():
    """The page's plots of a known-noise model: the labels with their noise as error bars."""
    x, y, noise = [1.0, 3.0, 4.5, 6.0, 8.5], [0.3, 1.2, -0.4, 0.8, -1.0], [0.5, 0.0, 0.2, 1, 0.1]
    labels = _labels(x, y, noise)
    spec = dict(SPEC, mcmc={"chains": 2, "warmup": 8, "samples": 6, "thinning": 2})
    model, _ = fitting.fit(spec, GridPool(dim=1, points_per_dim=51), labels, exclude=set())
    for png in (views.model_png(spec, model, labels), views.posterior_png(spec, model)):
        assert png.startswith(b"\x89PNG")
