"""A campaign with fidelities' exported model read offline (:mod:`clients.fidelity_metamodel`,
numpy alone): ``Metamodel.load`` hands it to the multi-fidelity reader, which predicts every
level as the worker does (:func:`worker.fidelity.answers.predict`, torch) to 1e-9, the top level
by default; an unknown level or a malformed document is a ValueError."""

import json

import numpy as np
import pytest

from fbgp_al.clients.fidelity_metamodel import FidelityMetamodel
from fbgp_al.clients.metamodel import Metamodel
from fbgp_al.service.routes.models import export_document
from fbgp_al.worker import fitting
from fbgp_al.worker.fidelity import answers
from tests.worker.fitting.test_fidelity import campaign


@pytest.fixture(scope="module")
def exported():
    spec, pool, labels, design = campaign()
    model, _ = fitting.fit(spec, pool, labels, design)
    document = json.loads(json.dumps(export_document("c1", dict(spec, name="f"), model, labels, 0)))
    return spec, model, labels, document


def test_the_offline_model_predicts_every_level_as_the_service(exported):
    spec, model, labels, document = exported
    offline = Metamodel.load(document)
    assert isinstance(offline, FidelityMetamodel) and offline.levels == ["coarse", "fine"]
    assert document["inputs"] == [{"name": "x", "lower": 0.0, "upper": 1.0}]
    assert document["data"]["fidelity"][:6] == ["coarse"] * 6 and len(document["data"]["x"][0]) == 1
    xs = [[0.05], [0.37], [0.8]]
    for level in ("coarse", "fine"):
        served = answers.predict(spec, model, labels, [[*p, level] for p in xs])
        got = offline.predict(xs, fidelity=level)
        for key in ("mean", "variance", "mixture_mean", "mixture_variance"):
            np.testing.assert_allclose(got[key], served[key], rtol=1e-9, atol=1e-12)
    top = offline.predict(xs)
    np.testing.assert_allclose(top["mixture_mean"], offline.predict(xs, "fine")["mixture_mean"])
    assert top.model_version == model["version"]


def test_an_unknown_level_or_a_malformed_document_is_refused(exported):
    _, _, _, document = exported
    with pytest.raises(ValueError, match="unknown fidelity 'medium'"):
        Metamodel.load(document).predict([[0.5]], fidelity="medium")
    broken = dict(document, fidelity=dict(document["fidelity"], theta=[[1.0, 2.0]]))
    with pytest.raises(ValueError, match="draws need"):
        Metamodel.load(broken)
    with pytest.raises(ValueError, match="not a multi-fidelity model"):
        FidelityMetamodel(dict(document, format_version=1))
