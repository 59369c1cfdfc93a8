"""The campaign pages: a list at ``/`` and ``/campaigns/{id}/view``, plain HTML that refreshes
itself while a campaign runs (the list while any of its campaigns does), with pictures drawn
by a worker (``/campaigns/{id}/plots/*.png``).
With ``FBGP_API_TOKEN`` set, a browser opens a page once with ``?token=`` (the service's token,
or for a campaign's page its owner token): the page sets it as an HttpOnly, SameSite=Strict
cookie and sends the browser to itself without the query, so the token stays out of links,
history and ``Referer``. The pages run no script."""

import asyncio
import base64
import hashlib
import html
import json
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from fbgp_al.service.campaign_page import campaign_body, numeric_inputs, running
from fbgp_al.service.deps import (
    PAGE_COOKIE,
    CampaignId,
    PageAuthorized,
    RedisDep,
    SettingsDep,
    StoreDep,
    TeamScope,
    team_of,
)
from fbgp_al.service.refusals import NotFound, Unprocessable
from fbgp_al.service.routes import bodies
from fbgp_al.service.routes.model_jobs import run_job
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary.defaults import output_names

PLOTS = ("model", "effects", "sobol", "pair", "posterior", "failures", "curve", "accuracy")
PER_OUTPUT = ("model", "effects", "sobol", "pair", "posterior")  # one picture per output
INDEX_PAGE = 50  # campaigns on a page of the index

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; }
td, th { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; }
th { text-align: left; } .error { color: #b00; } img { max-width: 100%; margin: 0.5em 0; }
.state-done { color: #070; } .muted { color: #777; }
figure { margin: 1em 0; } figcaption { max-width: 60em; font-size: 0.9em; }
h2 { border-top: 1px solid #ddd; padding-top: 0.6em; margin-top: 1.5em; }
form { margin: 1em 0; padding: 0.5em; background: #f4f4f4; }
"""


_STYLE_HASH = base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
# the pages' own stylesheet and images, nothing else: no script, no frame; a form sends to the
# pages themselves (the campaign page's choice of two inputs)
SECURITY_HEADERS = {
    "Content-Security-Policy": f"default-src 'none'; img-src 'self'; "
    f"style-src 'sha256-{_STYLE_HASH}'; base-uri 'none'; form-action 'self'; "
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


def list_page(
    store: CampaignStore, cursor: str | None = None, team: str | None = None
) -> HTMLResponse:
    """A page of :data:`INDEX_PAGE` campaigns after ``cursor`` (``team``'s only, with a team),
    with a link to the next."""
    rows = []
    ids, following = store.campaigns.ids_page(cursor, INDEX_PAGE, team)
    shown = bodies.statuses(store, ids)
    for s in shown:
        link = f"/campaigns/{quote(s['id'])}/view"
        version = "-" if s["model_version"] is None else s["model_version"]
        cells = [
            f"<a href='{link}'>{html.escape(s['name'])}</a>",
            s["id"],
            f"<span class='state-{s['state']}'>{s['state']}</span>",
            f"{s['n_labeled']} / {s['max_labels']}",
            s["n_failed"],
            version,
            html.escape(s["acquisition"]),
            s["mode"],
        ]
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
    refresh = any(running(s) for s in shown)  # every campaign done: nothing to wait for
    return _page("fbgp-al campaigns", f"<h1>Campaigns</h1>{table}{nav}", refresh=refresh)


def campaign_page(
    store: CampaignStore,
    campaign_id: str,
    horizontal: str | None = None,
    vertical: str | None = None,
) -> HTMLResponse:
    """A campaign's page (:func:`service.campaign_page.campaign_body`)."""
    name, body, refresh = campaign_body(store, campaign_id, horizontal, vertical)
    return _page(f"{name} - fbgp-al", body, refresh=refresh)


def _keep_token(request: Request) -> RedirectResponse:
    """The page again without ``?token=``, which the browser keeps as an HttpOnly,
    SameSite=Strict cookie (Secure over HTTPS) for every page and picture of this service
    (the check that it is valid here has passed)."""
    rest = request.url.remove_query_params("token")
    location = rest.path + (f"?{rest.query}" if rest.query else "")
    response = RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        PAGE_COOKIE,
        request.query_params["token"],
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


router = APIRouter(tags=["pages"], dependencies=[PageAuthorized])
PAIR_QUERY = (
    "A picture over two inputs (`pair`): the input across (`horizontal`) or up "
    "(`vertical`), a numeric input's name; default: the first numeric inputs."
)


@router.get("/", response_class=HTMLResponse, include_in_schema=False, dependencies=[TeamScope])
def index(request: Request, store: StoreDep, cursor: str | None = None):
    if "token" in request.query_params:
        return _keep_token(request)
    return list_page(store, cursor, team_of(request))


@router.get("/campaigns/{campaign_id}/view", response_class=HTMLResponse)
def view(
    campaign_id: CampaignId,
    request: Request,
    store: StoreDep,
    horizontal: Annotated[str | None, Query(description=PAIR_QUERY)] = None,
    vertical: Annotated[str | None, Query(description=PAIR_QUERY)] = None,
):
    """The campaign's page, for people: its state, inputs, and per output the model, each
    input's main effect, the Sobol indices and the model over two inputs (`horizontal`,
    `vertical`: the page's form), then the accuracy estimates, the failed runs and the
    diagnostics (HTML; it refreshes itself while the campaign runs). Opened once as
    `?token=<owner token>`, it keeps the token as a cookie."""
    if "token" in request.query_params:
        return _keep_token(request)
    return campaign_page(store, campaign_id, horizontal, vertical)


@router.get("/campaigns/{campaign_id}/plots/{kind}.png", response_class=Response)
async def plot(
    campaign_id: CampaignId,
    kind: Annotated[
        str,
        Path(
            description="`model`, `effects`, `sobol`, `pair`, `posterior`, "
            "`failures`, `accuracy` or `curve`."
        ),
    ],
    request: Request,
    store: StoreDep,
    redis: RedisDep,
    settings: SettingsDep,
    output: Annotated[
        str | None,
        Query(
            description="With several outputs: the output to draw (`model`, "
            "`effects`, `sobol`, `pair`, `posterior`); default: the first. "
            "`failures` is the one failure model of all the outputs."
        ),
    ] = None,
    horizontal: Annotated[str | None, Query(description=PAIR_QUERY)] = None,
    vertical: Annotated[str | None, Query(description=PAIR_QUERY)] = None,
):
    """A picture of the campaign's page (PNG). It is drawn by a worker once per change of the
    campaign and kept: every page that shows it meanwhile gets the one drawing. 404 when the
    campaign has no such picture yet; 422 for a `pair` over inputs that are not two distinct
    numeric inputs of the campaign.
    \f
    A change: :meth:`~service.store.plots.Plots.stamp`; the requests of this process
    that ask while it is drawn wait for the one drawing."""
    if "token" in request.query_params:
        return _keep_token(request)
    name, stamp, png, pair = await run_in_threadpool(
        _kept_plot, store, campaign_id, kind, output, horizontal, vertical
    )
    if png is None:
        job = (id(asyncio.get_running_loop()), campaign_id, name, stamp)
        drawing = _drawing.get(job)
        if drawing is None:
            args = (campaign_id, kind) if output is None else (campaign_id, kind, output)
            if pair is not None:
                args = (campaign_id, kind, output, pair)
            drawing = _drawing[job] = asyncio.ensure_future(
                run_in_threadpool(_draw, store, redis, settings, args, name, stamp)
            )
            drawing.add_done_callback(lambda _: _drawing.pop(job, None))
        png = await asyncio.shield(drawing)  # a request that goes leaves it to the others
    if png is None:
        raise NotFound(f"nothing to draw for {kind!r} yet")
    return Response(png, media_type="image/png", headers=SECURITY_HEADERS)


_drawing: dict[tuple, asyncio.Future] = {}  # the pictures being drawn for this process


def _kept_plot(
    store: CampaignStore,
    campaign_id: str,
    kind: str,
    output: str | None,
    horizontal: str | None = None,
    vertical: str | None = None,
) -> tuple[str, str, bytes | None, list[str] | None]:
    """The picture's name (``{kind}:{output}``), the stamp it is drawn at (the campaign's; a
    ``pair``'s with its two inputs, so that one picture per output is kept whichever two are
    asked), the picture drawn at that stamp if it is kept, and a ``pair``'s two inputs (None
    for another picture); 404 for an unknown picture or output, or a model's before the first
    model, 422 for a ``pair`` over anything but two distinct numeric inputs (default: the
    first two)."""
    if kind not in PLOTS:
        raise NotFound(f"no plot {kind!r}; there are {', '.join(PLOTS)}")
    spec = store.campaigns.spec(campaign_id)
    names = output_names(spec)
    if output is not None and (names is None or output not in names):
        have = "one output" if names is None else "outputs " + ", ".join(names)
        raise NotFound(f"no output {output!r}: the campaign has {have}")
    pair = _pair(spec, horizontal, vertical) if kind == "pair" else None
    version, stamp = store.plots.stamp(campaign_id)
    if kind not in ("curve", "accuracy") and version is None:
        raise NotFound(f"no model yet for campaign {campaign_id!r}")
    name = f"{kind}:{output or ''}"
    if pair is not None:
        stamp = f"{stamp}:{json.dumps(pair)}"
    return name, stamp, store.plots.cached(campaign_id, name, stamp), pair


def _pair(spec: dict, horizontal: str | None, vertical: str | None) -> list[str]:
    """A ``pair`` picture's two inputs (422 unless two distinct numeric inputs; 404 when the
    campaign has fewer than two)."""
    numeric = numeric_inputs(spec)
    if len(numeric) < 2:
        raise NotFound(
            f"a picture over two inputs needs two numeric inputs; the campaign has {len(numeric)}"
        )
    first = horizontal or next(n for n in numeric if n != vertical)
    pair = [first, vertical or next(n for n in numeric if n != first)]
    for axis, name in zip(("horizontal", "vertical"), pair, strict=True):
        if name not in numeric:
            raise Unprocessable(
                f"{axis}: {name!r} is not a numeric input of the campaign (its "
                f"numeric inputs: {', '.join(numeric)})"
            )
    if pair[0] == pair[1]:
        raise Unprocessable(
            f"horizontal and vertical are both {pair[0]!r}: two different inputs, please"
        )
    return pair


def _draw(
    store: CampaignStore, redis, settings, args: tuple, name: str, stamp: str
) -> bytes | None:
    drawn = run_job(redis, settings, "plot", *args)  # base64: a job's result is JSON
    png = None if drawn is None else base64.b64decode(drawn)
    if png is not None:
        store.plots.keep(args[0], name, stamp, png)
    return png
