"""The campaign pages: a list at ``/`` and ``/campaigns/{id}/view``, plain HTML that refreshes
itself while a campaign runs, with pictures drawn by a worker (``/campaigns/{id}/plots/*.png``).
With ``FBGP_API_TOKEN`` set, a browser opens a page once with ``?token=`` (the service's token,
or for a campaign's page its owner token): the page sets it as an HttpOnly, SameSite=Strict
cookie and sends the browser to itself without the query, so the token stays out of links,
history and ``Referer``. The pages run no script."""

import asyncio
import base64
import hashlib
import html
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from service.deps import (
    PAGE_COOKIE,
    CampaignId,
    PageAuthorized,
    RedisDep,
    SettingsDep,
    StoreDep,
    TeamScope,
    team_of,
)
from service.errors import NotFound
from service.routes import bodies
from service.routes.model_jobs import run_job
from service.store import CampaignStore
from worker.spec import pools
from worker.spec.defaults import output_names

PLOTS = ("model", "posterior", "failures", "curve", "accuracy")
INDEX_PAGE = 50  # campaigns on a page of the index

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; }
td, th { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; }
th { text-align: left; } .error { color: #b00; } img { max-width: 100%; margin: 0.5em 0; }
.state-done { color: #070; } .muted { color: #777; }
"""


_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
# the pages' own stylesheet and images, nothing else: no script, no frame, no form
SECURITY_HEADERS = {
    "Content-Security-Policy": f"default-src 'none'; img-src 'self'; "
    f"style-src 'sha256-{_STYLE_HASH}'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def _page(title: str, body: str, refresh: bool) -> HTMLResponse:
    meta = '<meta http-equiv="refresh" content="5">' if refresh else ""
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'>{meta}<title>{html.escape(title)}"
        f"</title><style>{STYLE}</style></head><body>{body}</body></html>",
        headers=SECURITY_HEADERS,
    )


def list_page(store: CampaignStore, cursor: str | None = None,
              team: str | None = None) -> HTMLResponse:  # fmt: skip
    """A page of :data:`INDEX_PAGE` campaigns after ``cursor`` (``team``'s only, with a team),
    with a link to the next."""
    rows = []
    ids, following = store.ids_page(cursor, INDEX_PAGE, team)
    for s in bodies.statuses(store, ids):
        link = f"/campaigns/{quote(s['id'])}/view"
        version = "-" if s["model_version"] is None else s["model_version"]
        cells = [
            f"<a href='{link}'>{html.escape(s['name'])}</a>", s["id"],
            f"<span class='state-{s['state']}'>{s['state']}</span>",
            f"{s['n_labeled']} / {s['max_labels']}", s["n_failed"], version,
            html.escape(s["acquisition"]), s["mode"],
        ]  # fmt: skip
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    heads = ("name", "id", "state", "labels", "failed runs", "model", "acquisition", "mode")
    header = "<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"
    table = f"<table>{header}{''.join(rows)}</table>"
    if not rows:
        table = "<p class='muted'>No campaigns yet: POST /campaigns (see /docs).</p>"
    links = []
    if cursor is not None:
        links.append("<a href='/'>first page</a>")
    if following is not None:
        links.append(f"<a id='next' href='/?cursor={quote(following)}'>next {INDEX_PAGE}</a>")
    nav = f"<p>{' | '.join(links)}</p>" if links else ""
    return _page("fbgp-al campaigns", f"<h1>Campaigns</h1>{table}{nav}", refresh=True)


def campaign_page(store: CampaignStore, campaign_id: str) -> HTMLResponse:
    s = bodies.status(store, campaign_id)
    spec = store.spec(campaign_id)
    history = store.history(campaign_id)
    version = s["model_version"]
    stamp = store.plot_stamp(campaign_id)[1]
    facts = [
        f"state <b class='state-{s['state']}'>{s['state']}</b>",
        f"labels <b id='labels'>{s['n_labeled']}</b> of {s['max_labels']}",
        f"pending {s['n_pending']}",
        f"failed runs <b id='failed'>{s['n_failed']}</b>",
        f"abandoned {s['n_abandoned']}",
        f"model version <b id='version'>{'-' if version is None else version}</b>",
        f"acquisition {html.escape(s['acquisition'])}",
        f"mode {s['mode']}",
    ]
    parts = [
        "<p><a href='/'>all campaigns</a></p>",
        f"<h1>{html.escape(s['name'])}</h1>",
        "<p>" + " &middot; ".join(facts) + "</p>",
    ]
    if s["state"] == "failed":
        parts.append(f"<p class='error' id='failed'>failed: {html.escape(s['last_error'] or '')}"
                     "; its owner can retry it (POST .../retry)</p>")  # fmt: skip
    elif s["last_error"]:
        parts.append(f"<p class='error'>last refit error: {html.escape(s['last_error'])}</p>")
    if s["stopped_by"]:
        v = s["stopped_by"]
        parts.append(f"<p class='state-done' id='stopped'>stopped by its rule: "
                     f"{html.escape(v['rule'])} = {v['value']:.4g} &le; {v['target']:g} at model "
                     f"{v['version']}; its owner can resume it (POST .../resume)</p>")  # fmt: skip
    if s["stalled"]:
        parts.append("<p class='error' id='stalled'>stalled: every point left has failed; "
                     "nothing more can be offered until its owner retries it (POST "
                     ".../retry)</p>")  # fmt: skip
    if s["failing"]:
        since = s["n_failed"] - s["n_forgiven"]
        parts.append(f"<p class='error' id='failing'>failing: {since} failed runs, more than "
                     f"max_failures ({s['max_failures']}); no point is handed out until its "
                     "owner retries it (POST .../retry)</p>")  # fmt: skip
    if s["n_failed"]:
        parts.append(_failures_table(store.failures(campaign_id, FAILURES_SHOWN), s["n_failed"]))
    if version is None:
        parts.append("<p class='muted'>No model yet: the initial design is being labeled.</p>")
    else:
        model = store.model(campaign_id)
        d = model["diagnostics"]
        numbers = [
            f"refit {d.get('refit_seconds', 0):.2f} s",
            f"R-hat {d['max_rhat']:.3f}",
            f"bulk ESS {d['min_ess_bulk']:.0f}",
            f"divergences {d['divergences']}",
            f"start {html.escape(str(d.get('warm_start', 'cold')))}",
        ]
        parts.append("<p>" + " &middot; ".join(numbers) + "</p>")
        names = list(model.get("outputs") or {})
        for name in names:  # several outputs: each one's accuracy
            a = model["outputs"][name].get("accuracy")
            if a:
                parts.append(f"<p id='accuracy-{html.escape(name)}'><b>{html.escape(name)}</b>: "
                             f"LOO RMSE {a['loo_rmse']:.4g} &middot; LOO NLPD "
                             f"{a['loo_nlpd']:.3f} &middot; ipv {a['ipv']:.4g} "
                             f"({a['ipv_relative']:.2%})</p>")  # fmt: skip
        if model.get("accuracy") and not names:
            a = model["accuracy"]
            estimates = [
                f"LOO RMSE <b id='loo-rmse'>{a['loo_rmse']:.4g}</b>",
                f"LOO NLPD {a['loo_nlpd']:.3f}",
                f"LOO 95% coverage {a['loo_coverage_95']:.0%}",
                f"ipv {a['ipv']:.4g} ({a['ipv_relative']:.2%})",
                f"ipv_f {a['ipv_f']:.4g}",
                f"qbc {a['qbc']:.4g} ({a['qbc_relative']:.2%})",
            ]
            parts.append("<p>" + " &middot; ".join(estimates) + "</p>")
        # the model over its inputs: one or two of them, numbers (no choice among them)
        drawable = len(spec["inputs"]) <= 2 and pools.space_of(spec).numeric
        kinds = ["model"] if drawable else []
        kinds.append("posterior")
        if model.get("failures") and any(i.get("type") != "choice" for i in spec["inputs"]):
            kinds.append("failures")  # P(failure) over one or two numeric inputs
        if any(e.get("event") == "model" and e.get("accuracy") for e in history):
            kinds.append("accuracy")
        if any(e.get("event") == "evaluate" for e in history):
            kinds.append("curve")
        for kind in kinds:
            src = f"/campaigns/{quote(campaign_id)}/plots/{kind}.png?v={stamp}"
            if names and kind in ("model", "posterior"):  # one picture per output
                for name in names:
                    parts.append(f"<div><img id='plot-{kind}-{html.escape(name)}' alt='{kind}' "
                                 f"src='{src}&amp;output={quote(name)}'></div>")  # fmt: skip
                continue
            parts.append(f"<div><img id='plot-{kind}' alt='{kind}' src='{src}'></div>")
    return _page(f"{s['name']} - fbgp-al", "".join(parts), refresh=s["state"] != "done")


def _coordinate(value) -> str:
    """A point's coordinate as the page shows it: a number to 6 digits, a choice's text as is."""
    return value if isinstance(value, str) else f"{value:.6g}"


FAILURES_SHOWN = 20  # the latest failed runs a campaign's page lists


def _failures_table(latest: list[dict], n_failed: int) -> str:
    """The latest failed runs, newest first: their point and reason."""
    rows = "".join(
        f"<tr><td>{html.escape(', '.join(_coordinate(v) for v in f['x']))}</td>"
        f"<td>{html.escape(f['reason'][:300])}</td></tr>"
        for f in reversed(latest)
    )
    more = f" (the latest {len(latest)} of {n_failed})" if n_failed > len(latest) else ""
    return (f"<h2>Failed runs{more}</h2><table id='failures'><tr><th>x</th><th>reason</th></tr>"
            f"{rows}</table>")  # fmt: skip


def _keep_token(request: Request) -> RedirectResponse:
    """The page again without ``?token=``, which the browser keeps as an HttpOnly,
    SameSite=Strict cookie (Secure over HTTPS) for every page and picture of this service
    (the check that it is valid here has passed)."""
    rest = request.url.remove_query_params("token")
    location = rest.path + (f"?{rest.query}" if rest.query else "")
    response = RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(PAGE_COOKIE, request.query_params["token"], path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")  # fmt: skip
    return response


router = APIRouter(tags=["pages"], dependencies=[PageAuthorized])


@router.get("/", response_class=HTMLResponse, include_in_schema=False,
            dependencies=[TeamScope])  # fmt: skip
def index(request: Request, store: StoreDep, cursor: str | None = None):
    if "token" in request.query_params:
        return _keep_token(request)
    return list_page(store, cursor, team_of(request))


@router.get("/campaigns/{campaign_id}/view", response_class=HTMLResponse)
def view(campaign_id: CampaignId, request: Request, store: StoreDep):
    """The campaign's page, for people: its state, labels, diagnostics, accuracy and plots
    (HTML; it refreshes itself while the campaign runs). Opened once as `?token=<owner token>`,
    it keeps the token as a cookie."""
    if "token" in request.query_params:
        return _keep_token(request)
    return campaign_page(store, campaign_id)


@router.get("/campaigns/{campaign_id}/plots/{kind}.png", response_class=Response)
async def plot(
    campaign_id: CampaignId,
    kind: Annotated[str, Path(description="`model`, `posterior`, `failures`, `accuracy` or "
                                          "`curve`.")],  # fmt: skip
    request: Request,
    store: StoreDep,
    redis: RedisDep,
    settings: SettingsDep,
    output: Annotated[
        str | None, Query(description="With several outputs: the output to draw (`model`, "
                          "`posterior`); default: the first.")
    ] = None,
):  # fmt: skip
    """A picture of the campaign's page (PNG). It is drawn by a worker once per change of the
    campaign and kept: every page that shows it meanwhile gets the one drawing. 404 when the
    campaign has no such picture yet.
    \f
    A change: :meth:`~service.store.plots.Plots.plot_stamp`; the requests of this process
    that ask while it is drawn wait for the one drawing."""
    if "token" in request.query_params:
        return _keep_token(request)
    name, stamp, png = await run_in_threadpool(_kept_plot, store, campaign_id, kind, output)
    if png is None:
        job = (id(asyncio.get_running_loop()), campaign_id, name, stamp)
        drawing = _drawing.get(job)
        if drawing is None:
            args = (campaign_id, kind) if output is None else (campaign_id, kind, output)
            drawing = _drawing[job] = asyncio.ensure_future(
                run_in_threadpool(_draw, store, redis, settings, args, name, stamp)
            )
            drawing.add_done_callback(lambda _: _drawing.pop(job, None))
        png = await asyncio.shield(drawing)  # a request that goes leaves it to the others
    if png is None:
        raise NotFound(f"nothing to draw for {kind!r} yet")
    return Response(png, media_type="image/png", headers=SECURITY_HEADERS)


_drawing: dict[tuple, asyncio.Future] = {}  # the pictures being drawn for this process


def _kept_plot(store: CampaignStore, campaign_id: str, kind: str,
               output: str | None) -> tuple[str, str, bytes | None]:  # fmt: skip
    """The picture's name (``{kind}:{output}``), the campaign's stamp, and the picture drawn at
    that stamp if it is kept; 404 for an unknown picture or output, or a model's before the
    first model."""
    if kind not in PLOTS:
        raise NotFound(f"no plot {kind!r}; there are {', '.join(PLOTS)}")
    names = output_names(store.spec(campaign_id))
    if output is not None and (names is None or output not in names):
        have = "one output" if names is None else "outputs " + ", ".join(names)
        raise NotFound(f"no output {output!r}: the campaign has {have}")
    version, stamp = store.plot_stamp(campaign_id)
    if kind not in ("curve", "accuracy") and version is None:
        raise NotFound(f"no model yet for campaign {campaign_id!r}")
    name = f"{kind}:{output or ''}"
    return name, stamp, store.cached_plot(campaign_id, name, stamp)


def _draw(store: CampaignStore, redis, settings, args: tuple, name: str,
          stamp: str) -> bytes | None:  # fmt: skip
    drawn = run_job(redis, settings, "plot", *args)  # base64: a job's result is JSON
    png = None if drawn is None else base64.b64decode(drawn)
    if png is not None:
        store.keep_plot(args[0], name, stamp, png)
    return png
