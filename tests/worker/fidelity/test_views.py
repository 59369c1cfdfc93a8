"""The page's picture of a multi-fidelity model: a PNG over one numeric input, none over more."""

from fbgp_al.worker import fitting
from fbgp_al.worker.fidelity import views
from tests.worker.fitting.test_fidelity import campaign


def test_the_levels_are_drawn_over_one_input_only():
    spec, pool, labels, design = campaign()
    model, _ = fitting.fit(spec, pool, labels, design)
    png = views.model_png(spec, model, labels)
    assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n"
    two = dict(spec, inputs=[{"name": "a", "lower": 0, "upper": 1}, *spec["inputs"]])
    assert views.model_png(two, model, labels) is None
