"""The body of a campaign's page (``/campaigns/{id}/view``), for an engineer: its state and
inputs, then per output what the model says (the model over one or two inputs, each input's
main effect, the Sobol indices, the model over two inputs chosen on the page), the accuracy
estimates model after model, the failed runs, and a Diagnostics section (the sampler's
numbers and the hyperparameter posterior); with fidelities, the levels, their labels, the cost
spent and the learned ``rho``, and each level's model over one input. The pictures are the worker's
(``/campaigns/{id}/plots/{kind}.png``, :mod:`service.pages`); the page runs no script: the two
inputs are chosen by a plain GET form (``?horizontal=&vertical=``)."""

from __future__ import annotations

import html
from urllib.parse import quote, urlencode

from fbgp_al.service.routes import bodies
from fbgp_al.service.store import CampaignStore
from fbgp_al.worker.vocabulary import fidelities
from fbgp_al.worker.vocabulary.defaults import output_names, output_title
from fbgp_al.worker.vocabulary.sampler import sampler_line

FAILURES_SHOWN = 20  # the latest failed runs a campaign's page lists

CAPTIONS = {
    "model": "The model over all its inputs: the posterior-mode GP's mean and its uncertainty "
    "(two standard deviations over one input, the standard deviation over two), with the "
    "labels.",
    "levels": "The model at each fidelity level over its input: the mean and two standard "
    "deviations of the mixture of the posterior's draws, the top level's in blue, with each "
    "level's labels.",
    "effects": "Main effects: along each input, the model's mean and 95% band with the other "
    "inputs averaged over their ranges (uniform; a log input on the log scale, an int or a "
    "choice over its values). A flat curve: the input matters little on average.",
    "sobol": "Sobol indices: the share of the variance of the model's mean due to each input "
    "alone (first-order) and with its interactions (total), with 95% intervals over the "
    "posterior's draws. Total much above first-order: the input acts through interactions.",
    "pair": "The model over two inputs, the others averaged over their ranges: its mean, and "
    "the width of its 95% band (where a label would teach most).",
}


def numeric_inputs(spec: dict) -> list[str]:
    """The names of the inputs a picture over two inputs may draw (not a choice)."""
    return [i["name"] for i in spec["inputs"] if i.get("type") != "choice"]


def chosen_pair(spec: dict, horizontal: str | None, vertical: str | None) -> tuple[list[str], str]:
    """The two numeric inputs to draw (the page's choice, else the first two) and a note on a
    choice that could not be taken ('' if none)."""
    numeric = numeric_inputs(spec)
    default = numeric[:2]
    if horizontal is None and vertical is None:
        return default, ""
    if horizontal not in numeric or vertical not in numeric:
        return default, "Choose two inputs that are numbers (not a choice input)."
    if horizontal == vertical:
        return default, "Choose two different inputs."
    return [horizontal, vertical], ""


def _describe(i: dict) -> str:
    name = html.escape(i["name"])
    kind = i.get("type") or "float"
    if kind == "choice":
        return f"<b>{name}</b>: {html.escape(', '.join(str(v) for v in i['values']))}"
    scale = {"float": "", "log": " (log scale)", "int": " (integers)"}[kind]
    return f"<b>{name}</b> {i['lower']:g} to {i['upper']:g}{scale}"


def point_text(names: list[str], x: list) -> str:
    """A point as ``load=10, thickness=2, material=steel``."""
    return ", ".join(
        f"{n}={v if isinstance(v, str) else format(v, '.6g')}"
        for n, v in zip(names, x, strict=False)
    )


def failures_table(latest: list[dict], n_failed: int, names: list[str]) -> str:
    """The latest failed runs, newest first: their point (with the inputs' names) and reason."""
    rows = "".join(
        f"<tr><td>{html.escape(point_text(names, f['x']))}</td>"
        f"<td>{html.escape(f['reason'][:300])}</td></tr>"
        for f in reversed(latest)
    )
    more = f"the latest {len(latest)} of {n_failed}, " if n_failed > len(latest) else ""
    return (
        f"<p class='muted'>The runs that failed ({more}newest first):</p>"
        "<table id='failures'><tr><th>point</th><th>reason</th></tr>"
        f"{rows}</table>"
    )


class _Pictures:
    """The ``<img>`` of each picture of one campaign's page at one stamp."""

    def __init__(self, campaign_id: str, stamp: str):
        self.base = f"/campaigns/{quote(campaign_id)}/plots"
        self.stamp = stamp

    def img(
        self, kind: str, output: str | None = None, alt: str = "", caption: str = "", **query: str
    ) -> str:
        params = {"v": self.stamp, **({"output": output} if output else {}), **query}
        src = f"{self.base}/{kind}.png?{urlencode(params)}"
        ident = f"plot-{kind}" + (f"-{output}" if output else "")
        caption = CAPTIONS.get(caption or kind)
        note = f"<figcaption class='muted'>{html.escape(caption)}</figcaption>" if caption else ""
        return (
            f"<figure><img id='{html.escape(ident)}' alt='{html.escape(alt or kind)}' "
            f"src='{html.escape(src)}'>{note}</figure>"
        )


def campaign_body(
    store: CampaignStore,
    campaign_id: str,
    horizontal: str | None = None,
    vertical: str | None = None,
) -> tuple[str, str, bool]:
    """The page's title, its HTML body, and whether it refreshes itself (while it runs)."""
    s = bodies.status(store, campaign_id)
    spec = store.campaigns.spec(campaign_id)
    levels = fidelities.levels(spec)
    if levels:  # the level is no input of the pictures: the page reads the declared ones
        spec = dict(spec, inputs=fidelities.declared_inputs(spec))
    version = s["model_version"]
    pictures = _Pictures(campaign_id, store.plots.stamp(campaign_id)[1])
    parts = [
        "<p><a href='/'>all campaigns</a></p>",
        f"<h1>{html.escape(s['name'])}</h1>",
        _facts(s),
        *_notes(s),
        "<p id='inputs'>inputs: "
        + " &middot; ".join(_describe(i) for i in spec["inputs"])
        + "</p>",
    ]
    if levels:
        parts.append(_fidelities(s, None))
    names = output_names(spec)
    outputs = [None] if names is None else names
    if version is None:
        parts.append("<p class='muted'>No model yet: the initial design is being labeled.</p>")
        if s["n_failed"]:
            parts.append(_failed_runs(store, campaign_id, spec, s, pictures, False))
        return s["name"], "".join(parts), running(s)
    model = store.models.latest(campaign_id)
    history = store.history.read(campaign_id)
    if levels:
        parts[-1] = _fidelities(s, model)
    sections = [(f"output-{o}", output_title(spec, o)) for o in names or []] or [
        ("model", "The model")
    ]
    sections += [
        ("accuracy", "Accuracy"),
        ("failed-runs", "Failed runs"),
        ("diagnostics", "Diagnostics"),
    ]
    links = " &middot; ".join(
        f"<a href='#{html.escape(a)}'>{html.escape(t)}</a>"
        for a, t in sections
        if a != "failed-runs" or s["n_failed"]
    )
    parts.append(f"<p>on this page: {links}</p>")
    pair, pair_note = chosen_pair(spec, horizontal, vertical)
    dim, numeric = len(spec["inputs"]), numeric_inputs(spec)
    drawable = dim <= 2 and len(numeric) == dim  # the mode GP over all its inputs
    if levels:  # each level's model over one input; no other picture of it yet
        drawable, dim = dim == 1 and len(numeric) == 1, 1
    draws_pair = len(numeric) >= 2 and not drawable and not levels
    if draws_pair:
        parts.append(_pair_form(campaign_id, numeric, pair, pair_note))
    for output in outputs:
        title = output_title(spec, output)
        if output is None:
            parts.append("<h2 id='model'>The model</h2>")
        else:
            parts.append(f"<h2 id='output-{html.escape(output)}'>{html.escape(title)}</h2>")
        if drawable:
            caption = "levels" if levels else "model"
            parts.append(pictures.img("model", output, f"{title}: the model", caption))
        if dim >= 2:
            parts.append(pictures.img("effects", output, f"{title}: main effects"))
            parts.append(pictures.img("sobol", output, f"{title}: Sobol indices"))
        if draws_pair:
            parts.append(
                pictures.img(
                    "pair",
                    output,
                    f"{title} over {pair[0]} and {pair[1]}",
                    horizontal=pair[0],
                    vertical=pair[1],
                )
            )
    parts.append(_accuracy(spec, model, history, pictures))
    if s["n_failed"]:
        parts.append(
            _failed_runs(store, campaign_id, spec, s, pictures, bool(model.get("failures")))
        )
    parts.append(_diagnostics(spec, model, [] if levels else outputs, pictures))
    return s["name"], "".join(parts), running(s)


def _fidelities(s: dict, model: dict | None) -> str:
    """A campaign with fidelities: its levels and their costs, the labels at each, the cost
    spent (and its budget), and each learned ``rho`` once there is a model."""
    counts = s["labels_per_fidelity"]
    levels = " &middot; ".join(
        f"<b>{html.escape(f['name'])}</b> cost {f['cost']:g}: "
        f"<span id='labels-{html.escape(f['name'])}'>{counts[f['name']]}</span> labels"
        for f in s["fidelities"]
    )
    budget = f" of max_cost {s['max_cost']:g}" if s["max_cost"] else ""
    parts = [f"fidelities: {levels}", f"cost spent <b id='cost'>{s['cost_spent']:g}</b>{budget}"]
    if model is not None and "fidelity" in model:
        names = model["fidelity"]["levels"]
        for j, rho in enumerate(model["fidelity"]["rho"]):
            parts.append(
                f"rho {html.escape(names[j])} &rarr; {html.escape(names[j + 1])} "
                f"<b id='rho-{j}'>{rho['mean']:.3g}</b> (90%: {rho['q05']:.3g} to "
                f"{rho['q95']:.3g})"
            )
    return "<p id='fidelities'>" + " &middot; ".join(parts) + "</p>"


def running(s: dict) -> bool:
    """Whether anything still moves in a campaign of status ``s``: it takes labels (any state
    but ``done`` and ``failed``), a refit is queued or running (a done campaign's last model
    included), or a ticket is out. Its page refreshes itself while it does, and the list while
    any of its campaigns does."""
    return s["state"] not in ("done", "failed") or s["refit"] != "idle" or s["n_pending"] > 0


def _facts(s: dict) -> str:
    version = s["model_version"]
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
    return "<p>" + " &middot; ".join(facts) + "</p>"


def _notes(s: dict) -> list[str]:
    """What the campaign's owner should know: it failed, stopped, stalled or is failing."""
    out = []
    if s["state"] == "failed":
        out.append(
            f"<p class='error' id='failed'>failed: {html.escape(s['last_error'] or '')}"
            "; its owner can retry it (POST .../retry)</p>"
        )
    elif s["last_error"]:
        out.append(f"<p class='error'>last refit error: {html.escape(s['last_error'])}</p>")
    if s["state"] == "done" and s["refit"] != "idle":
        shown = "no model yet" if s["model_version"] is None else f"model {s['model_version']}"
        out.append(
            f"<p id='final-model'>done: the model of its last labels is still fitting "
            f"({shown} shown); this page refreshes itself until it is in</p>"
        )
    if s["stopped_by"] and s["stopped_by"]["rule"] == "max_cost":
        v = s["stopped_by"]
        out.append(
            f"<p class='state-done' id='stopped'>done: its labels cost {v['value']:g}, its "
            f"max_cost is {v['target']:g}</p>"
        )
    elif s["stopped_by"]:
        v = s["stopped_by"]
        out.append(
            f"<p class='state-done' id='stopped'>stopped by its rule: "
            f"{html.escape(v['rule'])} = {v['value']:.4g} &le; {v['target']:g} at model "
            f"{v['version']}; its owner can resume it (POST .../resume)</p>"
        )
    if s["stalled"]:
        out.append(
            "<p class='error' id='stalled'>stalled: every point left has failed; "
            "nothing more can be offered until its owner retries it (POST "
            ".../retry)</p>"
        )
    if s["failing"]:
        since = s["n_failed"] - s["n_forgiven"]
        out.append(
            f"<p class='error' id='failing'>failing: {since} failed runs, more than "
            f"max_failures ({s['max_failures']}); no point is handed out until its "
            "owner retries it (POST .../retry)</p>"
        )
    return out


def _pair_form(campaign_id: str, numeric: list[str], pair: list[str], note: str) -> str:
    """The GET form that picks the two inputs of the pictures over two inputs."""

    def select(name: str, chosen: str) -> str:
        options = "".join(
            f"<option value='{html.escape(n)}'"
            f"{' selected' if n == chosen else ''}>{html.escape(n)}</option>"
            for n in numeric
        )
        return f"<label>{name} <select name='{name}'>{options}</select></label>"

    warn = f" <span class='error'>{html.escape(note)}</span>" if note else ""
    return (
        f"<form id='pair-form' method='get' action='/campaigns/{quote(campaign_id)}/view'>"
        "The model over two inputs, the others averaged: "
        f"{select('horizontal', pair[0])} {select('vertical', pair[1])} "
        f"<button type='submit'>draw</button>{warn}</form>"
    )


def _accuracy(spec: dict, model: dict, history: list[dict], pictures: _Pictures) -> str:
    """The Accuracy section: each output's estimates now, and model after model."""
    parts = ["<h2 id='accuracy'>Accuracy</h2>"]
    names = list(model.get("outputs") or {})
    for name in names:  # several outputs: each one's accuracy, in its units
        a = model["outputs"][name].get("accuracy")
        if a:
            parts.append(
                f"<p id='accuracy-{html.escape(name)}'>"
                f"<b>{html.escape(output_title(spec, name))}</b>: "
                f"LOO RMSE {a['loo_rmse']:.4g} &middot; LOO NLPD "
                f"{a['loo_nlpd']:.3f} &middot; ipv {a['ipv']:.4g} "
                f"({a['ipv_relative']:.2%})</p>"
            )
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
    # several outputs: each one's estimates (model events before they were kept have none)
    key = "outputs" if names else "accuracy"
    if any(e.get("event") == "model" and e.get(key) for e in history):
        parts.append(pictures.img("accuracy", alt="accuracy estimates, model after model"))
    if any(e.get("event") == "evaluate" for e in history):
        parts.append(pictures.img("curve", alt="learning curve of the /evaluate calls"))
    return "".join(parts)


def _failed_runs(
    store: CampaignStore,
    campaign_id: str,
    spec: dict,
    s: dict,
    pictures: _Pictures,
    failure_model: bool,
) -> str:
    """The Failed runs section: the failure model's picture, the latest failed runs."""
    parts = ["<h2 id='failed-runs'>Failed runs</h2>"]
    if failure_model and any(i.get("type") != "choice" for i in spec["inputs"]):
        parts.append(pictures.img("failures", alt="the failure model's P(failure)"))
    names = [i["name"] for i in spec["inputs"]]
    parts.append(
        failures_table(store.runs.failures(campaign_id, FAILURES_SHOWN), s["n_failed"], names)
    )
    return "".join(parts)


def _diagnostics(spec: dict, model: dict, outputs: list, pictures: _Pictures) -> str:
    """The Diagnostics section: the sampler's numbers and each output's posterior draws."""
    d = model["diagnostics"]
    numbers = [
        f"refit {d.get('refit_seconds', 0):.2f} s",
        html.escape(sampler_line(d)),
        f"start {html.escape(str(d.get('warm_start', 'cold')))}",
    ]
    parts = [
        "<h2 id='diagnostics'>Diagnostics</h2>",
        "<p id='sampler'>" + " &middot; ".join(numbers) + "</p>",
    ]
    for output in outputs:
        title = output_title(spec, output)
        parts.append(pictures.img("posterior", output, f"{title}: hyperparameter posterior"))
    return "".join(parts)
