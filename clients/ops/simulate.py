"""``fbgp-al simulate NAME --url URL [--campaign ID]``: a built-in simulator as a remote labeler.

It labels a campaign exactly as a user's remote simulator would (:func:`clients.runner.
run_simulator`): the design points the service hands out, then one point per model. Without
``--campaign`` it first creates one with the paper's settings for NAME
(:func:`clients.reproduction.runs.paper_body`: its pool, 3 initial points, the paper's iteration
count, 5 chains of 200 + 300 NUTS steps thinned by 10), which ``--acquisition``, ``--iterations``
and ``--mcmc fast`` change. A simulator of several outputs (``branin2``) labels a multi-output
campaign (:func:`multi_body`: 20 labels after the design unless ``--iterations`` says), with
each label's noise variances under ``--known-noise``.

SIGTERM stops it as Ctrl-C does: the ticket it holds is abandoned (its point is offered again
at once) and it exits with 143.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading

import numpy as np

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.reproduction.runs import paper_body, parse_iterations
from fbgp_al.clients.runner import run_simulator
from fbgp_al.clients.simulators import MULTI_SIMULATORS, SIMULATORS, MultiSimulator, get_simulator
from fbgp_al.worker.vocabulary.defaults import INITIAL_DESIGN_SIZE, MCMC_PRESETS, PAPER_ACQUISITIONS

MULTI_ITERATIONS = 20  # labels after the design of a multi-output simulator's campaign


def multi_body(
    sim: MultiSimulator,
    acquisition: str,
    run: int,
    iterations: int | None,
    mcmc: str,
    known_noise: bool = False,
) -> dict:
    """A campaign for a simulator of several outputs: its box, grid pool and ``outputs``."""
    body = {
        "name": f"{sim.name}-{acquisition}-{run}",
        "inputs": sim.inputs(),
        "outputs": sim.campaign_outputs(),
        "pool": sim.pool,
        "acquisition": acquisition,
        "initial_design": {"type": "maximin-lhs", "size": INITIAL_DESIGN_SIZE},
        "max_labels": INITIAL_DESIGN_SIZE + (iterations or MULTI_ITERATIONS),
        "mcmc": dict(MCMC_PRESETS[mcmc]),
        "seed": run,
    }
    if known_noise:
        body["noise"] = {"type": "known"}
    return body


class Terminated(BaseException):
    """SIGTERM: like KeyboardInterrupt, it is no Exception, so the runner abandons its ticket
    (:func:`clients.runner.run_simulator`) and raises it again."""


def _terminate(number, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_stops():
    """While it lasts, SIGTERM raises :class:`Terminated` in the main thread (elsewhere, where
    no handler may be set, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fbgp-al simulate",
        description="a built-in simulator labeling a campaign as a remote simulator would",
    )
    parser.add_argument(
        "name", choices=SIMULATORS + MULTI_SIMULATORS, help="the built-in simulator"
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service")
    parser.add_argument("--campaign", help="label this campaign (default: create one)")
    parser.add_argument("--token", help="bearer token (default: FBGP_API_TOKEN)")
    new = parser.add_argument_group("a new campaign")
    new.add_argument("--acquisition", default="qb-mgp", choices=[*PAPER_ACQUISITIONS, "random"])
    new.add_argument(
        "--iterations",
        default="paper",
        help="labels after the initial design: 'paper' (the paper's count for NAME) or a number",
    )
    new.add_argument("--mcmc", default="paper", choices=list(MCMC_PRESETS))
    new.add_argument("--run", type=int, default=0, help="repetition whose seed the campaign uses")
    new.add_argument(
        "--known-noise",
        action="store_true",
        help="a simulator of several "
        "outputs: post each label's noise variances (a known-noise campaign)",
    )
    parser.add_argument("--max-labels", type=int, help="stop after posting this many labels")
    parser.add_argument("--noise-seed", type=int, default=0, help="seed of the simulator noise")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds per long poll")
    parser.add_argument("--quiet", action="store_true", help="print no line per label")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Label until the campaign is done (or ``--max-labels``); returns the labels posted."""
    args = _parser().parse_args(argv)
    sim = get_simulator(args.name)
    campaign = args.campaign
    multi = isinstance(sim, MultiSimulator)
    if campaign is None and multi:
        body = multi_body(
            sim,
            args.acquisition,
            args.run,
            parse_iterations(args.iterations),
            args.mcmc,
            args.known_noise,
        )
    elif campaign is None:
        body = paper_body(
            args.name, args.acquisition, args.run, parse_iterations(args.iterations), args.mcmc
        )
    if campaign is None:
        with FbgpClient(args.url, args.token) as api:
            campaign = api.create_campaign(body).id
        print(
            f"simulate: created campaign {campaign} ({args.name}, {args.acquisition}, "
            f"{body['max_labels']} labels, MCMC {args.mcmc})",
            flush=True,
        )
    rng = np.random.default_rng(args.noise_seed)

    def f(x: list[float]) -> float | dict:
        if multi:
            return sim.label(x, rng, args.known_noise)
        return float(sim.sample(np.array([x]), rng)[0])

    def show(x: list[float], y: float | dict, n: int) -> None:
        shown = {k: float(f"{v:.5g}") for k, v in y.items()} if isinstance(y, dict) else f"{y:.5g}"
        print(f"  label {n:4d}: x = {np.round(x, 4).tolist()}  y = {shown}", flush=True)

    try:
        with _sigterm_stops():
            posted = run_simulator(
                args.url,
                campaign,
                f,
                token=args.token,
                wait=args.wait,
                max_labels=args.max_labels,
                on_label=None if args.quiet else show,
            )
    except Terminated:
        print(
            f"simulate: stopped by SIGTERM (campaign {campaign}); a ticket held was given back",
            flush=True,
        )
        raise SystemExit(128 + signal.SIGTERM) from None
    print(f"simulate: posted {posted} labels to campaign {campaign}", flush=True)
    return posted
