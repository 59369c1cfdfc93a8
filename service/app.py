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
from http import HTTPStatus
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry, generate_latest
from redis import Redis
from redis.exceptions import RedisError
from rq import Worker
from rq.job import JobStatus
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

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
bearer = HTTPBearer(auto_error=False, description="FBGP_API_TOKEN, or a campaign's own token")
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _authorized(request: Request, settings: Annotated[Settings, Depends(get_settings)],
                credentials: Bearer, token: PageToken = None) -> None:  # fmt: skip
    """With ``FBGP_API_TOKEN`` set, every call carries ``Authorization: Bearer <token>`` (a
    browser on the campaign pages may pass ``?token=``): the service's token opens everything,
    a campaign's token (returned when it was created) opens that campaign only (403 elsewhere).
    The service's token is compared in constant time; campaign tokens are looked up by their
    SHA-256. Without ``FBGP_API_TOKEN`` the service is open."""
    if not settings.api_token:
        return
    given = credentials.credentials if credentials else token
    if not given:
        raise HTTPException(401, "this call needs Authorization: Bearer <token>",
                            {"WWW-Authenticate": "Bearer"})  # fmt: skip
    if hmac.compare_digest(given.encode(), settings.api_token.encode()):
        return
    owner = CampaignStore(_connection(settings.redis_url)).token_owner(given)
    if owner is None:
        raise HTTPException(401, "the bearer token is not valid here",
                            {"WWW-Authenticate": 'Bearer error="invalid_token"'})  # fmt: skip
    campaign_id = request.path_params.get("campaign_id")
    if campaign_id != owner:
        where = f"campaign {campaign_id!r}" if campaign_id else "this call"
        raise HTTPException(403, f"the token is campaign {owner!r}'s: it does not open {where}")


Store = Annotated[CampaignStore, Depends(_store)]
AppSettings = Annotated[Settings, Depends(get_settings)]
campaigns = APIRouter(
    prefix="/campaigns", dependencies=[Depends(_authorized)],
    responses=schemas.problem_responses(400, 401, 403, 413, 422, 503),
)  # fmt: skip


# -- errors: application/problem+json ------------------------------------------------------------
def problem(status: int, detail: str, headers: dict | None = None, **more) -> JSONResponse:
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
            "detail": detail, **more}  # fmt: skip
    return JSONResponse(body, status_code=status, headers=headers,
                        media_type="application/problem+json")  # fmt: skip


@app.exception_handler(StarletteHTTPException)
def _http_error(request: Request, error: StarletteHTTPException):
    headers = dict(getattr(error, "headers", None) or {})
    detail = str(error.detail)
    if error.status_code == 405:  # Starlette's Allow names one route's methods, not the path's
        allowed = sorted(_methods_of(request))
        headers["Allow"] = ", ".join(allowed)
        detail = f"{request.method} is not supported here; use {' or '.join(allowed)}"
    return problem(error.status_code, detail, headers)


def _methods_of(request: Request) -> set[str]:
    """The methods some route serves at the request's path."""
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")
    return {m for m in methods if any(route.matches({**request.scope, "method": m})[0] == Match.FULL
                                      for route in request.app.router.routes)}  # fmt: skip


@app.exception_handler(NotFound)
def _not_found(request: Request, error: NotFound):
    return problem(404, str(error))


@app.exception_handler(RequestValidationError)
def _invalid(request: Request, error: RequestValidationError):
    # FastAPI's own handler echoes the input, which fails on NaN and infinity: say what is wrong
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in error.errors()]  # fmt: skip
    message = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}"
                        for e in errors)  # fmt: skip
    return problem(422, message or "invalid request", errors=errors)


@app.exception_handler(RedisError)
def _store_unreachable(request: Request, error: RedisError):
    log.error("Redis: %s", error)
    return problem(503, f"the store is unreachable ({type(error).__name__}); try again shortly",
                   {"Retry-After": "2"})  # fmt: skip


@app.exception_handler(Exception)
def _server_error(request: Request, error: Exception):
    log.error("unhandled error", exc_info=error)
    return problem(500, f"internal error ({type(error).__name__}); the service log has details")


def _unprocessable(message: str) -> HTTPException:
    return HTTPException(422, message)


class BodyLimit:
    """413 for a request body over ``max_body_bytes``: at once when Content-Length says so,
    else as soon as the streamed body grows past it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = get_settings().max_body_bytes
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            detail = f"the request body is over {limit} bytes (FBGP_MAX_BODY_BYTES)"
            response = problem(413, detail) if length.isdigit() else problem(400, "bad length")
            return await response(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"the request body is over {limit} bytes")
            return message

        return await self.app(scope, limited, send)


app.add_middleware(BodyLimit)


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


@app.get("/metrics", response_class=PlainTextResponse, responses=schemas.problem_responses(503))
def prometheus_metrics(redis: Annotated[Redis, Depends(_redis)]):
    shared = CollectorRegistry()
    shared.register(RedisCollector(redis, CampaignStore(redis)))
    text = generate_latest(metrics.registry) + generate_latest(shared)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


@app.get("/readyz", responses={503: {"description": "Redis unreachable, or no worker"}})
def readyz(redis: Annotated[Redis, Depends(_redis)], response: Response):
    try:
        redis.ping()
        workers = len(Worker.all(connection=redis))
    except RedisError as error:
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
    token = store.issue_token(spec["id"])
    return dict(spec, status=store.status(spec["id"]), token=token)


@campaigns.get("")
def list_campaigns(store: Store):
    out = []
    for campaign_id in store.ids():
        with contextlib.suppress(NotFound):  # deleted meanwhile
            out.append(store.status(campaign_id))
    return out


@campaigns.get("/{campaign_id}", responses=schemas.problem_responses(404))
def status(campaign_id: str, store: Store):
    return store.status(campaign_id)


@campaigns.delete("/{campaign_id}", status_code=204, responses=schemas.problem_responses(404))
def delete(campaign_id: str, store: Store):
    store.delete(campaign_id)
    return Response(status_code=204)


# -- the labeling loop -------------------------------------------------------------------------
def _choose(store: CampaignStore, campaign_id: str, now: float, lease: float):
    """The next point to hand out: ``("point", index, x, version)``, ``("wait", seconds)`` or
    ``("done",)``. Runs under the campaign's lock."""
    spec = store.spec(campaign_id)
    snap = store.snapshot(campaign_id, now)
    n, n_pending, pending, state = snap.n_labeled, snap.n_pending, snap.pending, snap.state
    if n >= spec["max_labels"]:
        return ("done",)
    if n + n_pending >= spec["max_labels"]:
        return ("wait", 5.0)
    labeled = set() if spec["allow_repeats"] else snap.labeled
    design_size = spec["initial_design"]["size"]
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
        store.revive_refit(campaign_id, now, lease)  # a refit whose worker died must not stall
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


NEXT_RESPONSES = {202: {"description": "no point yet"}, **schemas.problem_responses(404, 410)}


LABEL_RESPONSES = {200: {"description": "the same label again"},
                   **schemas.problem_responses(404, 409, 410)}  # fmt: skip
OBSERVATIONS_RESPONSES = {200: {"content": {"application/json": {}, "text/csv": {}}},
                          **schemas.problem_responses(404)}  # fmt: skip
# a model-based answer: 404 before the first model; 500 if the job failed, 503 if none answered
MODEL_RESPONSES = schemas.problem_responses(404, 500)
BUSY_RETRY_AFTER_SECONDS = 5  # a model call no worker took in time: ask again after this


@campaigns.get("/{campaign_id}/next", responses=NEXT_RESPONSES)
def next_point(campaign_id: str, store: Store, settings: AppSettings,
               wait: Annotated[float, Query(ge=0, allow_inf_nan=False)] = 0.0):  # fmt: skip
    deadline = time.monotonic() + min(wait, settings.max_wait_seconds)
    while True:
        now = time.time()
        with store.lock(campaign_id):
            choice = _choose(store, campaign_id, now, settings.refit_lease_seconds)
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


@campaigns.post("/{campaign_id}/label", status_code=201, responses=LABEL_RESPONSES)
def label(campaign_id: str, body: schemas.LabelPost, store: Store, response: Response):
    code, n, enqueue = store.record_label(campaign_id, body.ticket, body.y, time.time())
    if enqueue:
        _enqueue_refit(store, campaign_id)
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


def _enqueue_refit(store: CampaignStore, campaign_id: str) -> None:
    """The labels are stored already, so the answer stays a success even if the refit cannot
    be enqueued now: the state says it is queued, and it is revived once Redis answers."""
    try:
        store.enqueue_refit(campaign_id)
    except RedisError as error:
        log.warning("refit not enqueued (%s); it will be revived", error,
                    extra={"campaign": campaign_id})  # fmt: skip


@campaigns.post(
    "/{campaign_id}/observations", status_code=201, responses=schemas.problem_responses(404, 409)
)
def import_observations(campaign_id: str, body: schemas.Observations, store: Store):
    spec = _spec_with_points(store, campaign_id, body.x)
    code, n, enqueue = store.import_observations(campaign_id, body.x, body.y, time.time())
    if enqueue:
        _enqueue_refit(store, campaign_id)
    if code == 409:
        raise HTTPException(409, f"{len(body.y)} more labels would exceed max_labels "
                                 f"({spec['max_labels']}; {n} stored)")  # fmt: skip
    record_labels(store.r, len(body.y))
    return {"n_labeled": n, "imported": len(body.y)}


@campaigns.get("/{campaign_id}/observations", responses=OBSERVATIONS_RESPONSES)
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
@campaigns.get("/{campaign_id}/model", responses=schemas.problem_responses(404))
def model(campaign_id: str, store: Store):
    return store.model(campaign_id)


@campaigns.get("/{campaign_id}/history", responses=schemas.problem_responses(404))
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
    # every worker is busy (long refits): nothing is wrong with the request, so ask again
    raise HTTPException(503, f"no worker answered the {name} job within "
                        f"{settings.job_wait_seconds:g} s (all busy); try again shortly",
                        headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)})  # fmt: skip


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


@campaigns.post("/{campaign_id}/predict", responses=MODEL_RESPONSES)
def predict(campaign_id: str, body: schemas.Points, store: Store, settings: AppSettings):
    _checked_points(store, campaign_id, body.x)
    return _run(store, settings, "predict", campaign_id, body.x)


@campaigns.post("/{campaign_id}/acquisition", responses=MODEL_RESPONSES)
def acquisition(campaign_id: str, body: schemas.AcquisitionRequest, store: Store,
                settings: AppSettings):  # fmt: skip
    _checked_points(store, campaign_id, body.x)
    return _run(store, settings, "acquisition", campaign_id, body.x, body.acquisition)


@campaigns.post("/{campaign_id}/evaluate", responses=MODEL_RESPONSES)
def evaluate(campaign_id: str, body: schemas.Observations, store: Store, settings: AppSettings):
    _checked_points(store, campaign_id, body.x)
    return _run(store, settings, "evaluate", campaign_id, body.x, body.y)


app.include_router(campaigns)
app.include_router(pages.router([Depends(_authorized)], Store, _run),
                   responses=schemas.problem_responses(401, 403, 404, 500, 503))  # fmt: skip
