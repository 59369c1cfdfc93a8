"""``fbgp-al report CAMPAIGN``: a campaign as one self-contained HTML file, for an email.

    fbgp-al report CAMPAIGN [--url URL] [--token T] [-o FILE]

Everything is read over the HTTP API with the SDK (:class:`clients.client.FbgpClient`): the
status, the latest model, the history, the labels and failed runs, the Sobol indices
(``GET .../sensitivity``) and the campaign page's pictures (``GET .../plots/{kind}.png``, drawn
by the workers), which the file holds as ``data:`` URIs. It has no script and loads nothing: the
one link out is to the campaign's page on the service. A PDF: print it (a browser, or
``chromium --headless --print-to-pdf=report.pdf report.html``).
"""

from __future__ import annotations

import argparse
import base64
import html
import sys
import time
from urllib.parse import quote

from fbgp_al.clients.client import ApiError, FbgpClient

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
td, th { padding: 0.25em 0.7em; border-bottom: 1px solid #ddd; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
h2 { border-top: 1px solid #ccc; padding-top: 0.5em; margin-top: 1.6em; }
img { max-width: 100%; display: block; margin: 0.8em 0; } .muted { color: #666; }
"""
ACCURACY = (
    ("loo_rmse", "LOO RMSE"),
    ("loo_nlpd", "LOO NLPD"),
    ("loo_coverage_95", "LOO 95% coverage"),
    ("ipv", "ipv"),
    ("ipv_f", "ipv_f"),
    ("qbc", "qbc"),
)
DIAGNOSTICS = (
    ("method", "sampler"),
    ("max_rhat", "largest R-hat"),
    ("min_ess_bulk", "smallest bulk ESS"),
    ("divergences", "divergences"),
    ("khat", "Pareto k"),
    ("refit_seconds", "refit seconds"),
    ("warm_start", "start"),
)


def _e(value) -> str:
    if value is None:  # a diagnostic that does not apply (R-hat of a Laplace mixture)
        return ""
    return html.escape(str(value))


def _number(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return _e(value)


def _table(head: list[str], rows: list[list], numbers: bool = True) -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='n'>{_number(c)}</td>"
            if numbers and isinstance(c, (int, float))
            else f"<td>{_e(c)}</td>"
            for c in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def _title(output: dict | None) -> str:
    """An output as the pictures name it: ``stress [MPa]``, ``y`` for a single output."""
    if output is None:
        return "y"
    return f"{output['name']} [{output['units']}]" if output.get("units") else output["name"]


def _range(i: dict) -> str:
    if i.get("type") == "choice":
        return ", ".join(str(v) for v in i["values"])
    scale = {"log": " (log scale)", "int": " (integers)"}.get(i.get("type") or "float", "")
    return f"{i['lower']:g} to {i['upper']:g}{scale}"


def _point(names: list[str], x: list) -> str:
    return ", ".join(
        f"{n}={v if isinstance(v, str) else format(v, '.6g')}"
        for n, v in zip(names, x, strict=False)
    )


def pictures(
    api: FbgpClient,
    campaign_id: str,
    inputs: list[dict],
    outputs: list[dict] | None,
    history: list[dict],
    failures: bool,
) -> list[tuple[str, str, bytes]]:
    """The campaign page's pictures as ``(section, alt, png)``, in its order; one the service
    has none of (404) is left out."""
    numeric = [i["name"] for i in inputs if i.get("type") != "choice"]
    drawable = len(inputs) <= 2 and len(numeric) == len(inputs)
    wanted = []
    for output in outputs or [None]:
        name, title = (output or {}).get("name"), _title(output)
        section = "The model" if output is None else title
        if drawable:
            wanted.append((section, "model", name, {}, f"{title}: the model"))
        if len(inputs) >= 2:
            wanted.append((section, "effects", name, {}, f"{title}: main effects"))
            wanted.append((section, "sobol", name, {}, f"{title}: Sobol indices"))
        if len(numeric) >= 2 and not drawable:
            pair = {"horizontal": numeric[0], "vertical": numeric[1]}
            wanted.append(
                (section, "pair", name, pair, f"{title} over {numeric[0]} and {numeric[1]}")
            )
    key = "outputs" if outputs else "accuracy"  # several: each one's, in its own units
    if any(e.get("event") == "model" and e.get(key) for e in history):
        wanted.append(("Accuracy", "accuracy", None, {}, "accuracy estimates, model after model"))
    if any(e.get("event") == "evaluate" for e in history):
        wanted.append(("Accuracy", "curve", None, {}, "learning curve of the test sets"))
    if failures and numeric:
        wanted.append(("Failed runs", "failures", None, {}, "the failure model's P(failure)"))
    for output in outputs or [None]:
        title = _title(output)
        wanted.append(
            (
                "Diagnostics",
                "posterior",
                (output or {}).get("name"),
                {},
                f"{title}: hyperparameter posterior",
            )
        )
    out = []
    for section, kind, name, params, alt in wanted:
        try:
            out.append((section, alt, api.plot(campaign_id, kind, name, **params)))
        except ApiError as error:
            if error.status_code != 404:
                raise
    return out


def collect(api: FbgpClient, campaign_id: str) -> dict:
    """What the report shows, read over the API."""
    status = api.campaign(campaign_id)
    data = {
        "status": status,
        "name": status.raw.get("name", campaign_id),
        "inputs": status.inputs,
        "outputs": status.outputs,
        "observations": api.observations(campaign_id),
        "history": api.history(campaign_id),
        "model": None,
        "sensitivity": None,
        "pictures": [],
    }
    if status.model_version is None:
        return data
    model = api.model(campaign_id)
    data["model"] = model
    data["sensitivity"] = api.sensitivity(campaign_id)
    data["pictures"] = pictures(
        api, campaign_id, status.inputs, status.outputs, data["history"], status.n_failed > 0
    )
    return data


def render(data: dict, url: str, campaign_id: str, now: float) -> str:
    """The report's HTML: self-contained (inline style, images as ``data:`` URIs)."""
    status, model = data["status"], data["model"]
    outputs = data["outputs"]
    page = f"{url}/campaigns/{quote(campaign_id)}/view"
    written = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now))
    version = "no model yet" if model is None else f"model {model.version}"
    parts = [
        f"<h1>{_e(data['name'])}</h1>",
        f"<p>Campaign <a href='{_e(page)}'>{_e(campaign_id)}</a>: {_e(version)}, report "
        f"written {_e(written)} by <code>fbgp-al report</code>.</p>",
        "<h2 id='summary'>Summary</h2>",
        _table(
            [
                "state",
                "labels",
                "max labels",
                "pending",
                "failed runs",
                "abandoned",
                "acquisition",
                "mode",
            ],
            [
                [
                    status.state,
                    status.n_labeled,
                    status.max_labels,
                    status.n_pending,
                    status.n_failed,
                    status.n_abandoned,
                    status.raw.get("acquisition", ""),
                    status.raw.get("mode", ""),
                ]
            ],
        ),
        "<h3>Inputs</h3>",
        _table(
            ["input", "type", "values"],
            [[i["name"], i.get("type") or "float", _range(i)] for i in data["inputs"]],
        ),
    ]
    if outputs:
        parts += [
            "<h3>Outputs</h3>",
            _table(
                ["output", "units", "weight"],
                [[o["name"], o.get("units") or "", o.get("weight", 1.0)] for o in outputs],
            ),
        ]
    if model is not None:
        parts += _model_parts(model, outputs)
        parts += _sobol_parts(data["sensitivity"], outputs)
    section = None
    for name, alt, png in data["pictures"]:
        if name != section:
            section = name
            parts.append(f"<h2>{_e(name)}</h2>")
        uri = "data:image/png;base64," + base64.b64encode(png).decode()
        parts.append(f"<img alt='{_e(alt)}' src='{uri}'>")
    parts += _data_parts(data)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(data['name'])} - "
        f"fbgp-al report</title><style>{STYLE}</style></head><body>{''.join(parts)}"
        "</body></html>"
    )


def _model_parts(model, outputs: list[dict] | None) -> list[str]:
    """The model's diagnostics and accuracy estimates, per output."""
    single = [("y", {"diagnostics": model.diagnostics, "accuracy": model.accuracy})]
    per = (
        [(_title(o), model.outputs[o["name"]]) for o in outputs]
        if outputs and model.outputs
        else single
    )
    if len(per) > 1:  # the refit's own (its seconds), then each output's sampler
        per = [("all outputs", {"diagnostics": model.diagnostics}), *per]
    rows = [
        [title, *[own.get("diagnostics", {}).get(k, "") for k, _ in DIAGNOSTICS]]
        for title, own in per
    ]
    accuracy = [
        [title, *[own.get("accuracy", {}).get(k, "") for k, _ in ACCURACY]]
        for title, own in per
        if "accuracy" in own
    ]
    return [
        f"<h2 id='model'>Model {model.version} ({model.n_labeled} labels)</h2>",
        "<h3>Diagnostics of the sampler</h3>",
        _table(["output", *[h for _, h in DIAGNOSTICS]], rows),
        "<h3>Accuracy estimates (in each output's units, from the labels alone)</h3>",
        _table(["output", *[h for _, h in ACCURACY]], accuracy),
    ]


def _sobol_parts(sensitivity: dict, outputs: list[dict] | None) -> list[str]:
    """Each output's Sobol indices with their credible intervals."""
    per = (
        [(_title(o), sensitivity["outputs"][o["name"]]) for o in outputs]
        if outputs
        else [("y", sensitivity)]
    )
    parts = [
        "<h2 id='sobol'>Which inputs matter: Sobol indices</h2>",
        "<p class='muted'>The share of the variance of the model's mean due to each input "
        "alone (first-order) and with its interactions (total), each input uniform over "
        "its values; mean over the posterior's draws and credible interval.</p>",
    ]
    for title, s in per:
        level = f"{s['level']:.0%}"
        rows = [
            [
                name,
                f"{s['first']['mean'][j]:.3f}",
                f"{s['first']['low'][j]:.3f} to {s['first']['high'][j]:.3f}",
                f"{s['total']['mean'][j]:.3f}",
                f"{s['total']['low'][j]:.3f} to {s['total']['high'][j]:.3f}",
            ]
            for j, name in enumerate(s["inputs"])
        ]
        parts += [
            f"<h3 class='sobol'>{_e(title)} ({s['draws']} draws, {s['method']})</h3>",
            _table(
                ["input", "first-order", f"{level} interval", "total", f"{level} interval"], rows
            ),
        ]
    return parts


def _data_parts(data: dict) -> list[str]:
    """The labels (folded) and the failed runs, with the inputs' names."""
    obs, names = data["observations"], [i["name"] for i in data["inputs"]]
    outputs = [o["name"] for o in data["outputs"] or []]
    head = [*names, *(outputs or ["y"])]
    rows = [
        [*x, *([y[o] for o in outputs] if outputs else [y])]
        for x, y in zip(obs.x, obs.y, strict=True)
    ]
    if obs.fidelity is not None:  # a campaign with fidelities: each label's level
        head = [*names, "fidelity", "y"]
        rows = [[*r[:-1], f, r[-1]] for r, f in zip(rows, obs.fidelity, strict=True)]
    parts = [
        "<h2 id='data'>Data</h2>",
        *_fidelity_parts(data["status"].raw),
        f"<details><summary>{len(rows)} labels</summary>{_table(head, rows)}</details>",
    ]
    if obs.failures:
        failed = [[_point(names, f["x"]), f.get("reason", "")] for f in obs.failures]
        n = data["status"].n_failed
        parts += [
            f"<h3>Failed runs ({n}; the latest {len(failed)} kept)</h3>",
            _table(["point", "reason"], failed, numbers=False),
        ]
    return parts


def _fidelity_parts(status: dict) -> list[str]:
    """A campaign with fidelities: its levels, their costs and labels, and the cost spent."""
    if not status.get("fidelities"):
        return []
    counts = status.get("labels_per_fidelity") or {}
    rows = [[f["name"], f["cost"], counts.get(f["name"], 0)] for f in status["fidelities"]]
    budget = f" of max_cost {_e(status['max_cost'])}" if status.get("max_cost") else ""
    return [
        _table(["fidelity", "cost", "labels"], rows),
        f"<p>cost spent {_e(status.get('cost_spent'))}{budget}</p>",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="fbgp-al report",
        description="a campaign as one self-contained HTML file: the page's pictures, the Sobol "
        "indices, the model's diagnostics and accuracy, the data",
    )
    parser.add_argument("campaign", help="the campaign's id")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service")
    parser.add_argument(
        "--token", help="its owner token or the service's (default: FBGP_API_TOKEN)"
    )
    parser.add_argument(
        "-o",
        "--out",
        help="the file to write (default: fbgp-al-ID-report.html here), '-' for stdout",
    )
    args = parser.parse_args(argv)
    url = args.url.rstrip("/")
    try:
        with FbgpClient(url, args.token) as api:
            data = collect(api, args.campaign)
    except ApiError as error:
        raise SystemExit(f"fbgp-al report: {error}") from None
    document = render(data, url, args.campaign, time.time())
    if args.out == "-":
        sys.stdout.write(document)
        return
    out = args.out or f"fbgp-al-{args.campaign}-report.html"
    with open(out, "w", encoding="utf-8") as f:
        f.write(document)
    print(
        f"fbgp-al report: campaign {args.campaign}, {len(data['pictures'])} pictures -> {out}",
        file=sys.stderr,
    )
