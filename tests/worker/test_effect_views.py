"""The pictures of what a model says about its output (:mod:`worker.effect_views`), drawn from a
small fitted model of a float, a log and a choice input: each a PNG of the layout it promises,
the two-input picture only of two distinct numeric inputs, and the words for the inputs a
picture averages over."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from fbgp_al.worker import effect_views, fitting
from fbgp_al.worker.vocabulary.pools import pool_of
from fbgp_al.worker.vocabulary.space import Space

SPEC = {
    "inputs": [
        {"name": "load", "lower": 0.0, "upper": 10.0},
        {"name": "gap", "type": "log", "lower": 0.01, "upper": 10.0},
        {"name": "alloy", "type": "choice", "values": ["steel", "al"]},
    ],
    "pool": {"type": "grid", "points_per_dim": 9},
    "pool_subsample": 100,
    "acquisition": "qb-mgp",
    "mcmc": {"chains": 2, "warmup": 30, "samples": 10, "thinning": 2},
    "seed": 4,
}


@pytest.fixture(scope="module")
def fitted():
    space = Space.of(SPEC["inputs"])
    x = space.from_pool(space.stratify(np.random.default_rng(0).random((14, 3))))
    labels = [
        {
            "x": p,
            "y": float(np.sin(p[0] / 3) + np.log10(p[1]) + (p[2] == "al")),
            "index": None,
            "ticket": None,
        }
        for p in x
    ]
    torch.manual_seed(0)
    model, _ = fitting.fit(SPEC, pool_of(SPEC), labels, exclude=set())
    return model, labels


def _image(png: bytes) -> Image.Image:
    assert png.startswith(b"\x89PNG")
    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def test_each_input_s_main_effect_is_a_panel_of_one_row(fitted):
    model, labels = fitted
    image = _image(effect_views.effects_png(SPEC, model, labels, "y"))
    width, height = image.size
    assert width > 2 * height  # three panels side by side


def test_the_sobol_bars_are_drawn(fitted):
    model, labels = fitted
    assert _image(effect_views.sobol_png(SPEC, model, labels, "y")).size[0] > 300


def test_the_two_input_picture_is_only_of_two_distinct_numeric_inputs(fitted):
    model, labels = fitted
    width, height = _image(effect_views.pair_png(SPEC, model, labels, "y", (0, 1))).size
    assert width > height  # two panels: the mean and its band's width
    assert effect_views.pair_png(SPEC, model, labels, "y", (0, 2)) is None  # a choice
    assert effect_views.pair_png(SPEC, model, labels, "y", (1, 1)) is None


def test_the_words_for_the_inputs_averaged_over():
    space = Space.of(SPEC["inputs"])
    assert effect_views._others(space, [0, 1]) == "alloy averaged over its range"
    assert effect_views._others(space, [1]) == "load, alloy averaged over their ranges"
    assert effect_views._others(space, [0, 1, 2]) == "no other inputs"
