"""What the SDK answers (:mod:`clients.responses`): a campaign's status reads every field the
service's status schema declares that the SDK holds, keeps the rest in ``raw``, and reads a
body from a server that predates its optional fields; a model reads what it knows of a body and
says NaN where no chain drew the hyperparameters."""

import dataclasses
import math

from fbgp_al.clients.responses import CampaignStatus, Model
from fbgp_al.service.schemas.campaigns import CampaignStatus as StatusSchema

BODY = {
    "id": "c1",
    "name": "beam",
    "team": "lab",
    "state": "failing",
    "n_labeled": 7,
    "n_pending": 1,
    "max_labels": 30,
    "model_version": 6,
    "last_error": None,
    "refit": "queued",
    "refit_failures": 0,
    "refit_retry_at": None,
    "acquisition": "qb-mgp",
    "mode": "parallel",
    "inputs": [{"name": "x", "type": "float", "lower": 0, "upper": 1}],
    "outputs": None,
    "n_failed": 4,
    "n_abandoned": 2,
    "n_forgiven": 1,
    "max_failures": 2,
    "failing": True,
    "stalled": False,
    "stopped_by": None,
}


def test_the_status_reads_what_the_service_sends():
    body = StatusSchema(**BODY).model_dump(mode="json")  # a body the service's schema allows
    status = CampaignStatus.from_json(body)
    held = {f.name for f in dataclasses.fields(CampaignStatus)} - {"raw"}
    for name in held:
        assert getattr(status, name) == body[name], name
    assert status.raw == body and held <= set(StatusSchema.model_fields)


def test_a_status_from_a_server_before_the_optional_fields_has_their_defaults():
    old = {
        k: BODY[k] for k in ("id", "state", "n_labeled", "n_pending", "max_labels", "model_version")
    }
    status = CampaignStatus.from_json(old)
    assert (
        status.last_error,
        status.refit,
        status.n_failed,
        status.failing,
        status.stalled,
        status.stopped_by,
        status.inputs,
        status.outputs,
        status.team,
    ) == (None, None, 0, False, False, None, [], None, None)
    # what the status compares: not the raw body, the inputs nor the outputs
    assert status == CampaignStatus.from_json({**old, "inputs": [{"name": "z"}], "extra": 1})


def test_a_model_reads_what_it_knows_and_says_nan_without_chains():
    body = {
        "version": 3,
        "n_labeled": 12,
        "transform": {"y_mean": 0.0},
        "accuracy": None,
        "diagnostics": {"method": "laplace", "max_rhat": None, "min_ess_bulk": None, "khat": 0.3},
        "unknown_field": 1,
    }
    model = Model.from_json(body)
    assert (model.samples, model.acquisition_samples, model.mode, model.accuracy) == (
        None,
        None,
        None,
        {},
    )
    assert math.isnan(model.max_rhat) and math.isnan(model.min_ess)
    assert model.divergences == 0 and math.isnan(model.refit_seconds)
    nuts = Model.from_json(
        {
            **body,
            "diagnostics": {
                "max_rhat": 1.004,
                "min_ess_bulk": 190,
                "divergences": 2,
                "refit_seconds": 4.5,
            },
        }
    )
    assert (nuts.max_rhat, nuts.min_ess, nuts.divergences, nuts.refit_seconds) == (
        1.004,
        190.0,
        2,
        4.5,
    )
