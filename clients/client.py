"""A small typed HTTP client for the whole HTTP API (httpx, synchronous); its public name is
``fbgp_al.Client``.

```python
from fbgp_al import Client

with Client("http://127.0.0.1:8000") as api:      # token: argument or FBGP_API_TOKEN
    campaign = api.create_campaign(body)
    while (point := api.next_point(campaign.id, wait=20)) is not None:   # None: done (410)
        api.label(campaign.id, point.ticket, f(point.x))
        # or api.fail(campaign.id, point.ticket, "why"), api.abandon(campaign.id, point.ticket)
```

Every non-2xx answer raises :class:`ApiError` with the status code and the server's ``detail``.

Which calls are retried, and why that is safe: :mod:`clients.transport`.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from types import EllipsisType
from urllib.parse import quote

import httpx

from fbgp_al.clients.errors import ApiError, check_refit
from fbgp_al.clients.prediction import Prediction
from fbgp_al.clients.responses import (
    Campaign,
    CampaignStatus,
    Evaluation,
    LabelResult,
    Model,
    NextPoint,
    Observations,
    Pending,
    Readiness,
    RunReport,
)
from fbgp_al.clients.transport import (
    LONGEST_RETRY_AFTER,
    answer_detail,
    call,
    numbers_body,
    points_body,
)

MAX_REASON = 2000  # characters of a failure's reason (the service's limit); longer is cut


class FbgpClient:
    """The HTTP API of one service at ``url``.

    ``token``: the bearer token (default: ``FBGP_API_TOKEN`` from the environment, if set): the
    service's, or a campaign's owner token (:attr:`Campaign.owner_token`), or its simulator
    token (:attr:`Campaign.token`), which opens only the labeling loop and the status.
    ``timeout``: seconds per request (a long poll gets its ``wait`` on top); longer than the
    API's ``FBGP_JOB_WAIT_SECONDS`` [120], so that a busy service's 503 arrives. ``retries``:
    attempts after a connection error, with backoff ``backoff * 2**k`` seconds capped at 5.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 150.0,
        retries: int = 8,
        backoff: float = 0.25,
    ):
        if token is None:
            token = os.environ.get("FBGP_API_TOKEN") or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> FbgpClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- transport (clients.transport: retried as the module docstring says) ---------------------
    def _call(
        self, method: str, path: str, *, idempotent: bool = True, ok=(200,), **kw
    ) -> httpx.Response:
        return call(
            self._http,
            method,
            path,
            idempotent=idempotent,
            ok=ok,
            retries=self.retries,
            backoff=self.backoff,
            **kw,
        )

    # -- service ---------------------------------------------------------------------------------
    def healthz(self) -> dict:
        return self._call("GET", "/healthz").json()

    def readyz(self) -> Readiness:
        """Readiness; a 503 (not ready) is an answer here, not an error."""
        body = self._call("GET", "/readyz", ok=(200, 503)).json()
        ready = bool(body.get("ready"))
        return Readiness(
            ready,
            int(body.get("workers", 0)),
            body.get("detail"),
            body.get("status", "ready" if ready else "unavailable"),
        )

    def wait_ready(self, timeout: float = 60.0, poll: float = 0.5) -> Readiness:
        """Wait until ``/readyz`` says ready; TimeoutError with its last answer otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            ready = self.readyz()
            if ready.ready:
                return ready
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self.url} is not ready: {ready.detail}")
            time.sleep(poll)

    # -- campaigns -------------------------------------------------------------------------------
    def create_campaign(self, body: dict) -> Campaign:
        data = self._call("POST", "/campaigns", json=body, idempotent=False, ok=(201,)).json()
        status, token = data.pop("status"), data.pop("token", None)
        owner_token = data.pop("owner_token", None)
        return Campaign(data["id"], data, CampaignStatus.from_json(status), token, owner_token)

    def list_campaigns(self) -> list[CampaignStatus]:
        """Every campaign's status, in one call (see :meth:`iter_campaigns` for many)."""
        return [CampaignStatus.from_json(c) for c in self._call("GET", "/campaigns").json()]

    def campaigns_page(
        self, limit: int = 100, cursor: str | None = None
    ) -> tuple[list[CampaignStatus], str | None]:
        """One page of at most ``limit`` campaigns after ``cursor`` (None: the first page),
        and the next page's cursor (None: this was the last)."""
        params = {"limit": limit} | ({"cursor": cursor} if cursor is not None else {})
        r = self._call("GET", "/campaigns", params=params)
        return [CampaignStatus.from_json(c) for c in r.json()], r.headers.get("X-Next-Cursor")

    def iter_campaigns(self, page: int = 100) -> Iterator[CampaignStatus]:
        """Every campaign's status, by id, read ``page`` at a time."""
        cursor = None
        while True:
            found, cursor = self.campaigns_page(page, cursor)
            yield from found
            if cursor is None:
                return

    def campaign(self, campaign_id: str) -> CampaignStatus:
        return CampaignStatus.from_json(self._call("GET", f"/campaigns/{campaign_id}").json())

    def resume(self, campaign_id: str, stop: dict | None | EllipsisType = ...) -> CampaignStatus:
        """Let a campaign its stopping rule stopped go on (the owner's call; ``ApiError`` 409 if
        it was not stopped); ``stop``: a new rule, or None to remove it (default: kept)."""
        body = None if stop is ... else {"stop": stop}
        response = self._call(
            "POST", f"/campaigns/{campaign_id}/resume", idempotent=False, json=body
        )
        return CampaignStatus.from_json(response.json())

    def retry(self, campaign_id: str, forget_failures: bool = False) -> CampaignStatus:
        """The owner's word that what stopped the campaign is fixed: a failed refit runs again,
        a failing or stalled campaign's failed runs are forgiven and their points offered again
        where the failure model allows; ``forget_failures`` (the simulator changed): the
        failure model forgets them too (``ApiError`` 409 if there is nothing to retry)."""
        body = {"forget_failures": True} if forget_failures else None
        response = self._call(
            "POST", f"/campaigns/{campaign_id}/retry", idempotent=False, ok=(202,), json=body
        )
        return CampaignStatus.from_json(response.json())

    def delete_campaign(self, campaign_id: str, missing_ok: bool = False) -> None:
        """Delete a campaign; with ``missing_ok`` a 404 (gone already) is no error."""
        ok = (204, 404) if missing_ok else (204,)
        self._call("DELETE", f"/campaigns/{campaign_id}", ok=ok)

    # -- teams (the service token's calls) -------------------------------------------------------
    def create_team(self, name: str) -> str:
        """A new team of the stack; its token (shown once), which creates campaigns, lists the
        team's own and opens those, and nothing else. ``ApiError`` 409 if the name is taken."""
        return self._call(
            "POST", "/teams", json={"name": name}, idempotent=False, ok=(201,)
        ).json()["token"]

    def teams(self) -> list[dict]:
        """Every team: ``name``, ``created_at``, ``live`` (False: deleted, holding campaigns),
        ``n_campaigns``."""
        return self._call("GET", "/teams").json()

    def rotate_team_token(self, name: str) -> str:
        """A new token for team ``name``; its old one stops working at once (a deleted team's:
        it is live again)."""
        path = f"/teams/{quote(name, safe='')}/token"
        return self._call("POST", path, idempotent=False).json()["token"]

    def delete_team(self, name: str, missing_ok: bool = False) -> None:
        """End team ``name``'s token (its campaigns stay); with ``missing_ok`` a 404 (no live
        team of that name, e.g. a retry of a delete whose answer was lost) is no error."""
        ok = (204, 404) if missing_ok else (204,)
        self._call("DELETE", f"/teams/{quote(name, safe='')}", ok=ok)

    # -- the labeling loop -----------------------------------------------------------------------
    def try_next(self, campaign_id: str, wait: float = 0.0) -> NextPoint | Pending | None:
        """One ``/next`` call, long-polling up to ``wait`` seconds: a point, :class:`Pending`
        (202), or None when the campaign is done (410). A campaign whose points have all failed
        (its status says ``stalled``), or whose runs failed more than its ``max_failures``
        (``failing``), answers 409, raised as :class:`ApiError` (its owner's :meth:`retry`
        forgives them)."""
        timeout = self.timeout + wait
        key = {"Idempotency-Key": uuid.uuid4().hex}  # its retries get the ticket it got, if any
        response = self._call(
            "GET",
            f"/campaigns/{campaign_id}/next",
            params={"wait": wait},
            headers=key,
            ok=(200, 202, 410),
            timeout=timeout,
        )
        if response.status_code == 410:
            return None
        if response.status_code == 202:
            detail, _ = answer_detail(response)
            return Pending(float(response.headers.get("Retry-After", "1")), detail)
        return NextPoint(**response.json())

    def next_point(
        self,
        campaign_id: str,
        wait: float = 20.0,
        timeout: float | None = None,
        on_wait: Callable[[Pending], None] | None = None,
    ) -> NextPoint | None:
        """The next point to label, or None when the campaign is done.

        Asks again after every 202: at once after a long poll that used up its ``wait``,
        otherwise after what is left of ``Retry-After``. ``on_wait`` is called with each 202 (it
        may raise to give up); after ``timeout`` seconds ``ApiError(202, ...)`` is raised.
        """
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            asked = time.monotonic()
            answer = self.try_next(campaign_id, wait)
            if not isinstance(answer, Pending):
                return answer
            if on_wait is not None:
                on_wait(answer)
            now = time.monotonic()
            if now >= deadline:
                raise ApiError(202, f"no point within {timeout} s: {answer.detail}")
            pause = min(answer.retry_after, LONGEST_RETRY_AFTER) - (now - asked)
            time.sleep(max(0.0, min(pause, deadline - now)))

    def label(
        self,
        campaign_id: str,
        ticket: str,
        y: float | dict | None = None,
        *,
        noise: float | dict | None = None,
        replicates: Sequence[float] | dict | None = None,
        fidelity: str | None = None,
    ) -> LabelResult:
        """Post the label of ``ticket``: ``y``, and in a campaign with known noise its
        ``noise`` variance (original units), or instead ``replicates`` (two runs or more at the
        point: the service takes their mean and the variance of that mean). With several
        outputs each is a dict ``{name: ...}``; ``fidelity``: the level (checked). 409 (another
        label), 404 (unknown ticket), 410 (done) and 422 (y not finite, an output missing, noise
        missing or not expected, not the ticket's level) raise :class:`ApiError`."""
        body: dict = {"ticket": ticket} | ({"fidelity": fidelity} if fidelity else {})
        if replicates is not None:
            body["y_replicates"] = numbers_body(replicates, list)
        else:
            if y is None:
                raise ValueError("label needs y (or replicates)")
            body["y"] = numbers_body(y)
        if noise is not None:
            body["noise"] = numbers_body(noise)
        response = self._call("POST", f"/campaigns/{campaign_id}/label", json=body, ok=(200, 201))
        return LabelResult.from_json(response.json(), response.status_code == 201)

    def fail(self, campaign_id: str, ticket: str, reason: str = "") -> RunReport:
        """Report that ``ticket``'s run failed, and why: its lease ends now; its point is not
        offered again (unless the campaign's ``max_retries`` allows). 409 (the ticket ended
        otherwise) and 404 raise :class:`ApiError`."""
        body = {"ticket": ticket, "reason": reason[:MAX_REASON]}  # the service takes 2000
        return self._end_run(campaign_id, "fail", body)

    def abandon(self, campaign_id: str, ticket: str) -> RunReport:
        """Give ``ticket`` up: its lease ends now and its point is offered again."""
        return self._end_run(campaign_id, "abandon", {"ticket": ticket})

    def _end_run(self, campaign_id: str, call: str, body: dict) -> RunReport:
        response = self._call("POST", f"/campaigns/{campaign_id}/{call}", json=body, ok=(200, 201))
        data = response.json()
        return RunReport(data["ticket"], data["status"], data["count"], response.status_code == 201)

    def renew(self, campaign_id: str, ticket: str) -> float:
        """Extend ``ticket``'s live lease by the campaign's ``lease_seconds`` from now; returns
        the new expiry (unix seconds). 409 once the lease has expired or the ticket ended."""
        response = self._call("POST", f"/campaigns/{campaign_id}/renew", json={"ticket": ticket})
        return float(response.json()["expires_at"])

    def import_observations(
        self, campaign_id: str, x, y: Sequence[float], noise=None, fidelity=None
    ) -> int:
        """Import labeled data ``x`` ``[n, d]``, ``y`` ``[n]`` (original units), with their
        noise variances ``noise`` ``[n]`` in a campaign with known noise, their levels'
        names ``fidelity`` in one with fidelities; returns the number of labels stored now."""
        body = {"x": points_body(x), "y": [numbers_body(v) for v in y]}
        body |= {} if fidelity is None else {"fidelity": list(fidelity)}
        if noise is not None:
            body["noise"] = [numbers_body(v) for v in noise]
        key = {"Idempotency-Key": uuid.uuid4().hex}  # its retries are stored once
        response = self._call(
            "POST", f"/campaigns/{campaign_id}/observations", json=body, headers=key, ok=(200, 201)
        )
        return int(response.json()["n_labeled"])

    def observations(self, campaign_id: str) -> Observations:
        body = self._call("GET", f"/campaigns/{campaign_id}/observations").json()
        fields = (body.get("failures", []), body.get("noise"), body.get("fidelity"))
        return Observations(body["x"], body["y"], *fields)

    def observations_csv(self, campaign_id: str) -> str:
        """The labeled data as CSV: a header of input names (and ``fidelity``), ``y`` (and
        ``noise``), ``status`` and ``reason``; a row per label (``ok``), then per failed run."""
        headers = {"Accept": "text/csv"}
        return self._call("GET", f"/campaigns/{campaign_id}/observations", headers=headers).text

    # -- the model -------------------------------------------------------------------------------
    def model(self, campaign_id: str) -> Model:
        """The latest model; ``ApiError`` 404 before the first one."""
        return Model.from_json(self._call("GET", f"/campaigns/{campaign_id}/model").json())

    def export_model(self, campaign_id: str, path: str | os.PathLike | None = None) -> dict:
        """The latest model as a self-contained document (``GET .../model/export``), which
        :class:`clients.metamodel.Metamodel` loads to predict without the service; with
        ``path``, also written there as the service sent it. ``ApiError`` 404 before the first
        model."""
        response = self._call("GET", f"/campaigns/{campaign_id}/model/export")
        if path is not None:
            with open(path, "wb") as f:
                f.write(response.content)
        return response.json()

    def history(self, campaign_id: str) -> list[dict]:
        """The campaign's events, oldest first (``GET .../history``): each model (its
        diagnostics and ``accuracy``; with several outputs each one's under ``outputs``),
        evaluation, failed refit, stop, resume, failed and abandoned run kept."""
        return self._call("GET", f"/campaigns/{campaign_id}/history").json()

    def plot(self, campaign_id: str, kind: str, output: str | None = None, **inputs: str) -> bytes:
        """A picture of the campaign's page, PNG bytes (``GET .../plots/{kind}.png``):
        ``model``, ``effects``, ``sobol``, ``pair``, ``posterior``, ``failures``, ``accuracy``
        or ``curve``; ``output``: with several outputs, whose; ``inputs``: a ``pair``'s
        ``horizontal=`` and ``vertical=`` input names. ``ApiError`` 404 when there is none
        to draw (yet)."""
        params = {"output": output, **inputs} if output else dict(inputs)
        return self._call(
            "GET", f"/campaigns/{campaign_id}/plots/{kind}.png", params=params
        ).content

    def wait_for_model(
        self, campaign_id: str, version: int, timeout: float | None = None, poll: float = 0.2
    ) -> CampaignStatus:
        """Wait until the campaign's model has seen ``version`` labels (or more).

        :class:`RefitFailed` when the refit failed and none is queued or running; TimeoutError
        after ``timeout`` seconds.
        """
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            status = self.campaign(campaign_id)
            if status.model_version is not None and status.model_version >= version:
                return status
            check_refit(status, version)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"campaign {campaign_id}: no model {version} in {timeout} s")
            time.sleep(poll)

    def predict(self, campaign_id: str, x, fidelity=None) -> Prediction | dict[str, Prediction]:
        """Predictions at ``x`` (``m`` points, each a list of the inputs' values) by the
        campaign's latest model (with fidelities, of the top level or of level ``fidelity``): a
        :class:`~clients.prediction.Prediction` (``p["mean"]``, ...), or with several outputs
        ``{name: Prediction}``, as :meth:`clients.metamodel.Metamodel.predict` answers."""
        call = {"x": points_body(x)} | ({"fidelity": fidelity} if fidelity else {})
        body = self._call("POST", f"/campaigns/{campaign_id}/predict", json=call).json()
        if "outputs" in body:
            version = body.get("model_version")
            chance = body.get("p_success")  # one for all outputs, where runs have failed
            return {
                name: Prediction.from_json(p, version, chance)
                for name, p in body["outputs"].items()
            }
        return Prediction.from_json(body)

    def acquisition(self, campaign_id: str, x, acquisition: str | None = None) -> list[float]:
        """Acquisition values at ``x`` ``[m, d]`` (the campaign's own acquisition by default)."""
        body = {"x": points_body(x), "acquisition": acquisition}
        return self._call("POST", f"/campaigns/{campaign_id}/acquisition", json=body).json()[
            "values"
        ]

    def sensitivity(
        self, campaign_id: str, method: str = "closed-form", level: float = 0.95
    ) -> dict:
        """Which inputs matter: the first-order and total Sobol indices of the latest model's
        mean, each ``{"mean", "low", "high"}`` over the posterior's draws, lists in the order of
        ``inputs`` (with several outputs ``{"outputs": {name: ...}}``): the body of
        ``GET .../sensitivity``."""
        return self._call(
            "GET",
            f"/campaigns/{campaign_id}/sensitivity",
            params={"method": method, "level": level},
        ).json()

    def evaluate(
        self,
        campaign_id: str,
        x,
        y: Sequence[float] | dict,
        noise: Sequence[float] | dict | None = None,
    ) -> Evaluation | dict[str, Evaluation]:
        """Test metrics of the latest model on ``x``, ``y``; ``noise``: the test points' known
        noise variances (campaigns with known noise), added to their predictive variances. With
        several outputs ``y`` (and ``noise``) are ``{name: [values]}`` and the answer
        ``{name: Evaluation}``."""
        body = {"x": points_body(x), "y": numbers_body(y, list)}
        if noise is not None:
            body["noise"] = numbers_body(noise, list)
        data = self._call("POST", f"/campaigns/{campaign_id}/evaluate", json=body).json()
        version = data.get("model_version")
        if "outputs" in data:
            return {name: Evaluation.from_json(e, version) for name, e in data["outputs"].items()}
        return Evaluation.from_json(data, version)
