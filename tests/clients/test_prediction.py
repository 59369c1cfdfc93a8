"""One shape for a prediction (:mod:`clients.prediction`): ``/predict``'s body read into arrays,
each by attribute and as a read-only mapping of the four, with the model that answered."""

import numpy as np
import pytest

from fbgp_al.clients.prediction import Prediction

BODY = {
    "mean": [1.0, 2.0],
    "variance": [0.1, 0.2],
    "mixture_mean": [1.1, 2.1],
    "mixture_variance": [0.3, 0.4],
    "model_version": 7,
}


def test_a_prediction_reads_its_body_into_arrays_by_name_and_as_a_mapping():
    p = Prediction.from_json(BODY)
    assert p.model_version == 7 and isinstance(p.mean, np.ndarray) and p.mean.dtype == float
    assert list(p) == ["mean", "variance", "mixture_mean", "mixture_variance"] and len(p) == 4
    for key in p:
        np.testing.assert_array_equal(p[key], BODY[key])
        assert p[key] is getattr(p, key)
    assert set(dict(p)) == set(Prediction.KEYS)  # model_version is not one of the arrays
    with pytest.raises(KeyError):
        p["model_version"]
    with pytest.raises(AttributeError):  # read-only
        p.mean = np.zeros(2)


def test_an_outputs_body_takes_the_model_version_it_is_given():
    output = {k: v for k, v in BODY.items() if k != "model_version"}
    assert Prediction.from_json(output, model_version=3).model_version == 3
    assert Prediction.from_json(output).model_version is None
