"""Liveness, readiness and metrics: no token needed."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CollectorRegistry, generate_latest
from redis.exceptions import RedisError

from fbgp_al.service import capacity, queues
from fbgp_al.service.deps import RedisDep, SettingsDep, StoreDep
from fbgp_al.service.middleware import metrics
from fbgp_al.service.observability import RedisCollector
from fbgp_al.service.schemas.health import Health, Readiness
from fbgp_al.service.schemas.problems import problem_responses

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz():
    """200 whenever the process runs (the same as `/livez`)."""
    return {"status": "ok"}


@router.get("/livez", response_model=Health)
async def livez():
    """200 whenever the process runs (readiness, with its dependencies, is /readyz)."""
    return {"status": "ok"}


@router.get("/metrics", response_class=PlainTextResponse, responses=problem_responses(503))
def prometheus_metrics(redis: RedisDep, store: StoreDep, settings: SettingsDep):
    """Prometheus metrics (text format): requests and latencies, queue depths, failed jobs,
    refit seconds, labels stored, runs failed and abandoned, campaigns by state, Redis's memory
    and its data directory's free disk."""
    shared = CollectorRegistry()
    shared.register(RedisCollector(redis, store, settings))
    text = generate_latest(metrics.registry) + generate_latest(shared)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get(
    "/readyz",
    response_model=Readiness,
    response_model_exclude_none=True,
    responses={
        503: {
            "description": "Redis unreachable or refusing writes, or no worker",
            "model": Readiness,
        }
    },
)
def readyz(redis: RedisDep, settings: SettingsDep, response: Response):
    """200 when Redis answers and takes writes and a worker is registered, with `status`
    `degraded` and why when Redis's memory or its disk is nearly full (before it refuses the
    writes labels need); 503 otherwise, saying which."""
    try:
        redis.ping()
        workers = queues.worker_count(redis)
        status, detail = capacity.read(redis, settings).verdict(settings)
    except RedisError as error:
        response.status_code = 503
        return {
            "ready": False,
            "status": capacity.UNAVAILABLE,
            "detail": f"Redis unreachable: {error}",
        }
    if status == capacity.UNAVAILABLE:
        response.status_code = 503
        return {"ready": False, "status": status, "detail": detail, "workers": workers}
    if workers == 0:
        response.status_code = 503
        return {
            "ready": False,
            "status": capacity.UNAVAILABLE,
            "detail": "no worker is running",
            "workers": 0,
        }
    return {"ready": True, "status": status, "detail": detail, "workers": workers}
