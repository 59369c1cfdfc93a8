"""The model and its answers: ``/model``, ``/history``, and ``/predict``, ``/acquisition``,
``/evaluate``, which are short jobs on the high-priority queue that a worker runs while the
request waits."""

from __future__ import annotations

from fastapi import APIRouter

from service import limits, queues, schemas
from service.deps import Authorized, RedisDep, SettingsDep, StoreDep
from service.errors import Unprocessable
from service.routes.labeling import LEARNED_NOISE, spec_with_points
from service.store import CampaignStore
from worker.defaults import known_noise

router = APIRouter(prefix="/campaigns/{campaign_id}", tags=["models"], dependencies=[Authorized])

# a model-based answer: 404 before the first model; 500 if the job failed, 503 if none answered
MODEL_RESPONSES = schemas.problem_responses(404, 500)


@router.get("/model", response_model=schemas.Model, responses=schemas.problem_responses(404))
def model(campaign_id: str, store: StoreDep):
    return store.model(campaign_id)


@router.get("/history", response_model=list[schemas.HistoryEvent],
            responses=schemas.problem_responses(404))  # fmt: skip
def history(campaign_id: str, store: StoreDep):
    """One entry per model version stored or refit failed, oldest first."""
    return store.history(campaign_id)


def run_job(redis, settings, name: str, *args):
    """Run a model job on a worker and wait for its answer (503 when all are busy)."""
    return queues.run_short(redis, name, *args, wait_seconds=settings.job_wait_seconds,
                            retry_after=settings.busy_retry_after_seconds)  # fmt: skip


def _checked_points(store: CampaignStore, campaign_id: str, x: list) -> dict:
    spec = spec_with_points(store, campaign_id, x)
    store.model(campaign_id)  # 404 before the first model
    return spec


@router.post("/predict", response_model=schemas.Prediction, responses=MODEL_RESPONSES)
def predict(campaign_id: str, body: schemas.Points, store: StoreDep, redis: RedisDep,
            settings: SettingsDep):  # fmt: skip
    _checked_points(store, campaign_id, body.x)
    return run_job(redis, settings, "predict", campaign_id, body.x)


@router.post("/acquisition", response_model=schemas.AcquisitionValues, responses=MODEL_RESPONSES)
def acquisition(campaign_id: str, body: schemas.AcquisitionRequest, store: StoreDep,
                redis: RedisDep, settings: SettingsDep):  # fmt: skip
    _checked_points(store, campaign_id, body.x)
    return run_job(redis, settings, "acquisition", campaign_id, body.x, body.acquisition)


@router.post("/evaluate", response_model=schemas.Evaluation, responses=MODEL_RESPONSES)
def evaluate(campaign_id: str, body: schemas.Observations, store: StoreDep, redis: RedisDep,
             settings: SettingsDep):  # fmt: skip
    """The test set's metrics; ``noise``: the test points' known noise variances (campaigns with
    known noise), added to their predictive variances."""
    limits.check_evaluate(len(body.x), settings)
    if body.noise is not None and not known_noise(store.spec(campaign_id)):
        raise Unprocessable(f"noise: {LEARNED_NOISE}")
    _checked_points(store, campaign_id, body.x)
    if body.noise is None:  # the job's arguments as they were before known noise
        return run_job(redis, settings, "evaluate", campaign_id, body.x, body.y)
    return run_job(redis, settings, "evaluate", campaign_id, body.x, body.y, body.noise)
