"""A deterministic simulator's campaign: refits on noise-free labels with and without the noise
floor, side by side, and a default campaign run to its end against a service.

    python -m clients.reproduction.noise_free --n 40 75 --floors 0 1e-6
    python -m clients.reproduction.noise_free --url http://127.0.0.1:8000 --max-labels 200

The labels (``clients/data/noise_free_gramacy_lee.json``) are the first 81 of a default campaign
on the noise-free Gramacy & Lee 1-D function, in the order it chose them; its refit at 81 labels
never finished without the floor. Offline, each refit is cold, with the campaign defaults but
for the floor; beyond 81 labels use ``--url``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "noise_free_gramacy_lee.json"


def recorded() -> dict:
    return json.loads(DATA.read_text())


def campaign(n: int, mcmc: dict) -> tuple[dict, list[dict]]:
    """The recorded campaign's spec with ``mcmc``, and its first ``n`` labels."""
    data = recorded()
    labels = [{"x": x, "y": y} for x, y in zip(data["x"][:n], data["y"][:n], strict=True)]
    return {**data["spec"], "mcmc": mcmc}, labels


def gramacy_lee(x: list) -> float:
    """The noise-free Gramacy & Lee (2012) function on [0.5, 2.5]."""
    return float(np.sin(10 * np.pi * x[0]) / (2 * x[0]) + (x[0] - 1) ** 4)


def offline(ns: list[int], floors: list[float]) -> None:
    from fbgp_al.worker import fitting
    from fbgp_al.worker.vocabulary.defaults import MCMC_DEFAULTS

    print("n\tfloor\tseconds\tgradients\tmax R-hat\tdivergences\tmin step\tmax depth\tmedian noise")
    for n in ns:
        for floor in floors:
            spec, labels = campaign(n, {**MCMC_DEFAULTS, "noise_floor": floor})
            started = time.perf_counter()
            post = fitting.posterior(spec, fitting.prepare(spec, labels), None)
            d = post.diagnostics
            print(
                f"{n}\t{floor:g}\t{time.perf_counter() - started:.1f}\t"
                f"{d['gradient_evaluations']}\t{d['max_rhat']:.3f}\t{d['divergences']}\t"
                f"{min(d['step_size']):.3g}\t{d['tree_depth_max']}\t"
                f"{float(post.noise.median()):.3g}",
                flush=True,
            )


def run_campaign(url: str, max_labels: int) -> None:
    """A default campaign on the function, labeled to its end; each model's refit time."""
    import httpx

    from fbgp_al.clients.client import FbgpClient
    from fbgp_al.clients.runner import run_simulator

    body = {**recorded()["spec"], "name": "noise-free-gramacy-lee", "max_labels": max_labels}
    with FbgpClient(url) as api:
        campaign_id = api.create_campaign(body).id
    started = time.time()
    run_simulator(url, campaign_id, gramacy_lee, wait=30)
    history = httpx.get(f"{url}/campaigns/{campaign_id}/history", timeout=60).json()
    models = [e for e in history if e["event"] == "model"]
    seconds = np.array([e["refit_seconds"] for e in models])
    state = httpx.get(f"{url}/campaigns/{campaign_id}", timeout=60).json()
    print(
        f"campaign {campaign_id}: {state['state']}, {state['n_labeled']} labels in "
        f"{time.time() - started:.0f} s; {len(models)} models, refit seconds max "
        f"{seconds.max():.1f}, median {np.median(seconds):.1f}, over 60: "
        f"{int((seconds > 60).sum())}; max R-hat {max(e['max_rhat'] for e in models):.3f}, "
        f"divergences {sum(e['divergences'] for e in models)}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=[40, 75],
        help="labels of each offline refit (at most 81)",
    )
    parser.add_argument(
        "--floors",
        type=float,
        nargs="+",
        default=[0.0, 1e-6],
        help="the noise floors to compare (mcmc.noise_floor)",
    )
    parser.add_argument("--url", help="run a default campaign against this service instead")
    parser.add_argument("--max-labels", type=int, default=200)
    args = parser.parse_args(argv)
    if args.url:
        run_campaign(args.url.rstrip("/"), args.max_labels)
    else:
        offline(args.n, args.floors)


if __name__ == "__main__":
    main()
