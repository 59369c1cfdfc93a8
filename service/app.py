"""The HTTP API of CONTRACT.md. Routes are Redis reads and writes; model-based answers are short
jobs on the high-priority queue that a worker runs while the request waits."""

from __future__ import annotations

import contextlib
import csv
import hmac
import io
import logging
import math
import time
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CollectorRegistry, generate_latest
from redis import Redis
from rq import Worker
from rq.job import JobStatus

from service import pages, queues, schemas
from service.observability import Metrics, RedisCollector, record_labels
from service.settings import Settings, get_settings
from service.store import CampaignStore, NotFound, pool_of, to_original

log = logging.getLogger("fbgp.api")
metrics = Metrics()

app = FastAPI(
    title="fbgp-al",
    version="0.1.0",
    description="Bayesian active learning with fully Bayesian GPs, as a labeling service",
)


def _redis(settings: Annotated[Settings, Depends(get_settings)]) -> Redis:
    return _connection(settings.redis_url)


_connections: dict[str, Redis] = {}


def _connection(url: str) -> Redis:
    if url not in _connections:
        _connections[url] = Redis.from_url(url, socket_timeout=30, health_check_interval=30)
    return _connections[url]


def _store(redis: Annotated[Redis, Depends(_redis)]) -> CampaignStore:
    return CampaignStore(redis)


PageToken = Annotated[str | None, Query(include_in_schema=False)]


def _authorized(settings: Annotated[Settings, Depends(get_settings)],
                authorization: Annotated[str | None, Header()] = None,
                token: PageToken = None) -> None:  # fmt: skip
    """With ``FBGP_API_TOKEN`` set: ``Authorization: Bearer <token>`` (or, for a browser on the
    campaign pages, ``?token=``), compared in constant time."""
    if not settings.api_token:
        return
    given = authorization.removeprefix("Bearer ") if authorization else token
    if not given or not hmac.compare_digest(given.encode(), settings.api_token.encode()):
        raise HTTPException(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})


Store = Annotated[CampaignStore, Depends(_store)]
AppSettings = Annotated[Settings, Depends(get_settings)]
campaigns = APIRouter(prefix="/campaigns", dependencies=[Depends(_authorized)])


@app.exception_handler(NotFound)
def _not_found(request: Request, error: NotFound):
    return JSONResponse({"detail": str(error)}, status_code=404)


@app.exception_handler(RequestValidationError)
def _invalid(request: Request, error: RequestValidationError):
    # FastAPI's own handler echoes the input, which fails on NaN and infinity: say what is wrong
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in error.errors()]  # fmt: skip
    message = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}"
                        for e in errors)  # fmt: skip
    return JSONResponse({"detail": message or "invalid request", "errors": errors}, status_code=422)


def _unprocessable(message: str) -> HTTPException:
    return HTTPException(422, message)


@app.middleware("http")
async def _observe(request: Request, call_next):
    started = time.perf_counter()
    response = await call_next(request)
    seconds = time.perf_counter() - started
    route = getattr(request.scope.get("route"), "path", "unmatched")
    metrics.requests.labels(request.method, route, str(response.status_code)).inc()
    metrics.latency.labels(request.method, route).observe(seconds)
    extra = {"method": request.method, "route": route, "status": response.status_code,
             "seconds": round(seconds, 6)}  # fmt: skip
    campaign = request.scope.get("path_params", {}).get("campaign_id")
    if campaign:
        extra["campaign"] = campaign
    log.info("%s %s %d", request.method, route, response.status_code, extra=extra)
    return response


@app.get("/healthz")
def healthz():
    return {"status": "ok"}


@app.get("/livez")
def livez():
    """200 whenever the process runs (readiness, with its dependencies, is /readyz)."""
    return {"status": "ok"}


@app.get("/metrics", response_class=PlainTextResponse)
def prometheus_metrics(redis: Annotated[Redis, Depends(_redis)]):
    shared = CollectorRegistry()
    shared.register(RedisCollector(redis, CampaignStore(redis)))
    text = generate_latest(metrics.registry) + generate_latest(shared)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


@app.get("/readyz")
def readyz(redis: Annotated[Redis, Depends(_redis)], response: Response):
    try:
        redis.ping()
        workers = len(Worker.all(connection=redis))
    except Exception as error:
        response.status_code = 503
        return {"ready": False, "detail": f"Redis unreachable: {error}"}
    if workers == 0:
        response.status_code = 503
        return {"ready": False, "detail": "no worker is running", "workers": 0}
    return {"ready": True, "workers": workers}


# -- campaigns ---------------------------------------------------------------------------------
@campaigns.post("", status_code=201)
def create(body: schemas.CampaignCreate, store: Store):
    spec = store.create(body.model_dump())
    return dict(spec, status=store.status(spec["id"]))


@campaigns.get("")
def list_campaigns(store: Store):
    out = []
    for campaign_id in store.ids():
        with contextlib.suppress(NotFound):  # deleted meanwhile
            out.append(store.status(campaign_id))
    return out


@campaigns.get("/{campaign_id}")
def status(campaign_id: str, store: Store):
    return store.status(campaign_id)


@campaigns.delete("/{campaign_id}", status_code=204)
def delete(campaign_id: str, store: Store):
    store.delete(campaign_id)
    return Response(status_code=204)


# -- the labeling loop -------------------------------------------------------------------------
def _choose(store: CampaignStore, campaign_id: str, now: float):
    """The next point to hand out: ``("point", index, x, version)``, ``("wait", seconds)`` or
    ``("done",)``. Runs under the campaign's lock."""
    spec = store.spec(campaign_id)
    n = store.n_labeled(campaign_id)
    if n >= spec["max_labels"]:
        return ("done",)
    pending = store.pending_indices(campaign_id, now)
    n_pending = store.r.zcard(store.k(campaign_id, "leases"))
    if n + n_pending >= spec["max_labels"]:
        return ("wait", 5.0)
    labeled = set() if spec["allow_repeats"] else store.labeled_indices(campaign_id)
    design_size = spec["initial_design"]["size"]
    state = store.state(campaign_id)
    if n < design_size:  # the initial design: all of its points may be out at once
        for index in spec["design_index"]:
            if index not in labeled and index not in pending:
                x = _pool_point(spec, index)
                return ("point", index, x, None)
        return ("wait", 1.0)
    version = state.get("model_version")
    version = int(version) if version is not None else None
    wait = max(1.0, min(30.0, float(state.get("last_refit_seconds") or 1.0)))
    if version != n:
        store.revive_refit(campaign_id, now)  # a refit whose worker died must not stall us
    if spec["mode"] == "sequential" and (version != n or n_pending > 0):
        return ("wait", wait)
    if spec["mode"] == "parallel" and (version is None or n_pending >= spec["max_pending"]):
        return ("wait", wait)
    for point in store.ranking(campaign_id):
        if point["index"] not in labeled and point["index"] not in pending:
            return ("point", point["index"], point["x"], version)
    return ("wait", wait)


def _pool_point(spec: dict, index: int) -> list[float]:
    return to_original(spec, pool_of(spec).points([index])[0]).tolist()


NEXT_RESPONSES = {202: {"description": "no point yet"}, 410: {"description": "campaign done"}}


@campaigns.get("/{campaign_id}/next", responses=NEXT_RESPONSES)
def next_point(campaign_id: str, store: Store, settings: AppSettings,
               wait: Annotated[float, Query(ge=0, allow_inf_nan=False)] = 0.0):  # fmt: skip
    deadline = time.monotonic() + min(wait, settings.max_wait_seconds)
    while True:
        now = time.time()
        with store.lock(campaign_id):
            choice = _choose(store, campaign_id, now)
            if choice[0] == "point":
                _, index, x, version = choice
                spec = store.spec(campaign_id)
                return store.issue(campaign_id, index, x, version, spec["lease_seconds"], now)
        if choice[0] == "done":
            raise HTTPException(410, "the campaign is done: it has max_labels labels")
        if time.monotonic() >= deadline:
            retry = str(max(1, math.ceil(choice[1])))
            return JSONResponse({"detail": "no point can be given yet", "retry_after": int(retry)},
                                status_code=202, headers={"Retry-After": retry})  # fmt: skip
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


@campaigns.post("/{campaign_id}/label", status_code=201)
def label(campaign_id: str, body: schemas.LabelPost, store: Store, response: Response):
    code, n, enqueue = store.record_label(campaign_id, body.ticket, body.y, time.time())
    if enqueue:
        store.enqueue_refit(campaign_id)
    if code == 404:
        raise HTTPException(404, f"unknown ticket {body.ticket!r}")
    if code == 409:
        raise HTTPException(409, "this ticket has a different label, or its point is labeled")
    if code == 410:
        raise HTTPException(410, "the campaign is done: it has max_labels labels")
    if code == 201:
        record_labels(store.r, 1)
    response.status_code = code
    return {"ticket": body.ticket, "y": body.y, "n_labeled": n}


@campaigns.post("/{campaign_id}/observations", status_code=201)
def import_observations(campaign_id: str, body: schemas.Observations, store: Store):
    spec = _spec_with_points(store, campaign_id, body.x)
    code, n, enqueue = store.import_observations(campaign_id, body.x, body.y, time.time())
    if enqueue:
        store.enqueue_refit(campaign_id)
    if code == 409:
        raise HTTPException(409, f"{len(body.y)} more labels would exceed max_labels "
                                 f"({spec['max_labels']}; {n} stored)")  # fmt: skip
    record_labels(store.r, len(body.y))
    return {"n_labeled": n, "imported": len(body.y)}


@campaigns.get("/{campaign_id}/observations")
def export_observations(campaign_id: str, store: Store,
                        accept: Annotated[str | None, Header()] = None):  # fmt: skip
    spec = store.spec(campaign_id)
    labels = store.labels(campaign_id)
    x, y = [label["x"] for label in labels], [label["y"] for label in labels]
    if accept and "text/csv" in accept:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([i["name"] for i in spec["inputs"]] + ["y"])
        for xi, yi in zip(x, y, strict=True):
            writer.writerow([repr(v) for v in xi] + [repr(yi)])
        return Response(out.getvalue(), media_type="text/csv")
    return {"x": x, "y": y}


# -- the model -----------------------------------------------------------------------------------
@campaigns.get("/{campaign_id}/model")
def model(campaign_id: str, store: Store):
    return store.model(campaign_id)


@campaigns.get("/{campaign_id}/history")
def history(campaign_id: str, store: Store):
    """One entry per model version stored or refit failed, oldest first."""
    return store.history(campaign_id)


def _run(store: CampaignStore, settings: Settings, name: str, *args):
    """Run a short job on a worker and wait for its answer."""
    job = queues.enqueue_short(store.r, name, *args)
    deadline = time.monotonic() + settings.job_wait_seconds
    delay = 0.005
    while time.monotonic() < deadline:
        status = job.get_status(refresh=True)
        if status == JobStatus.FINISHED:
            return job.return_value()
        if status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
            raise HTTPException(500, f"the {name} job failed on the worker")
        time.sleep(delay)
        delay = min(0.05, delay * 1.5)
    job.cancel()
    raise HTTPException(503, f"no worker answered the {name} job in time")


def _spec_with_points(store: CampaignStore, campaign_id: str, x: list) -> dict:
    """The campaign's spec, once ``x`` is known to fit its inputs (422 otherwise)."""
    spec = store.spec(campaign_id)
    try:
        schemas.check_points(x, [schemas.InputSpec(**i) for i in spec["inputs"]])
    except ValueError as error:
        raise _unprocessable(str(error)) from None
    return spec


def _checked_points(store: CampaignStore, campaign_id: str, x: list) -> dict:
    spec = _spec_with_points(store, campaign_id, x)
    store.model(campaign_id)  # 404 before the first model
    return spec


@campaigns.post("/{campaign_id}/predict")
def predict(campaign_id: str, body: schemas.Points, store: Store, settings: AppSettings):
    _checked_points(store, campaign_id, body.x)
    return _run(store, settings, "predict", campaign_id, body.x)


@campaigns.post("/{campaign_id}/acquisition")
def acquisition(campaign_id: str, body: schemas.AcquisitionRequest, store: Store,
                settings: AppSettings):  # fmt: skip
    _checked_points(store, campaign_id, body.x)
    return _run(store, settings, "acquisition", campaign_id, body.x, body.acquisition)


@campaigns.post("/{campaign_id}/evaluate")
def evaluate(campaign_id: str, body: schemas.Observations, store: Store, settings: AppSettings):
    _checked_points(store, campaign_id, body.x)
    return _run(store, settings, "evaluate", campaign_id, body.x, body.y)


app.include_router(campaigns)
app.include_router(pages.router([Depends(_authorized)], Store, _run))
