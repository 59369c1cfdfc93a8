"""The HTTP API (its OpenAPI document at ``/openapi.json``), assembled: error mapping, middleware,
one router per resource. Routes are Redis reads and writes; model-based answers are short jobs
that a worker runs while the request waits. ``fbgp-al api`` serves it (:mod:`service.server`:
uvicorn, with a deadline on each request's headers)."""

from __future__ import annotations

from fastapi import FastAPI

from fbgp_al.service import apidocs, errors, pages
from fbgp_al.service.middleware import (
    BodyAfterToken,
    BodyDeadline,
    BodyLimit,
    CloseAfterError,
    Observe,
    StoreOutage,
)
from fbgp_al.service.routes import campaigns, health, labeling, models, teams
from fbgp_al.service.schemas.problems import problem_responses


class App(FastAPI):
    """FastAPI, with :class:`~service.middleware.CloseAfterError` around all of it."""

    def build_middleware_stack(self):
        return CloseAfterError(super().build_middleware_stack())


app = App(
    title="fbgp-al",
    version="0.1.0",
    description="Bayesian active learning with fully Bayesian GPs, as a labeling service",
    docs_url=None,  # served offline by service.apidocs
    redoc_url=None,
)
errors.install(app)
apidocs.install(app)
# every /campaigns and /teams call may be malformed, unauthorized, slow, too large, invalid,
# or meet no Redis
CAMPAIGN_ERRORS = problem_responses(400, 401, 403, 408, 413, 422, 503)
app.include_router(health.router)
for resource in (campaigns, labeling, models, teams):
    app.include_router(resource.router, responses=CAMPAIGN_ERRORS)
app.include_router(pages.router, responses=problem_responses(401, 403, 404, 422, 500, 503))

ROUTERS = (health, campaigns, labeling, models, teams, pages)
app.add_middleware(BodyLimit)
app.add_middleware(BodyAfterToken, routes=[r for m in ROUTERS for r in m.router.routes])
app.add_middleware(BodyDeadline)
app.add_middleware(StoreOutage)  # inside Observe, which so counts its 503s
app.add_middleware(Observe)
