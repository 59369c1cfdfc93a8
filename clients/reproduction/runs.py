"""One benchmark run against the service: a simulator x acquisition x repetition as a campaign.

The run's initial design and labels are :func:`clients.reproduction.protocol.run_setup`'s, imported
through ``POST /observations`` before any point is asked for, so every acquisition of a repetition
starts from exactly the same labeled data. (The campaign body's ``seed`` is the same run seed, so
the service's own design would pick the same three points; importing also fixes their noisy labels,
which a labeler would otherwise draw anew for each acquisition.) Then, one label per iteration,
every model version is scored before its point is labeled: NLML (and the mixture's NLPD) on the
noisy test set through ``/evaluate``, RMSE against the true mean on the run's RMSE points through
``/predict`` (the mode GP's mean; ``/evaluate`` would also build the joint covariance of up to
10,000 points, which RMSE does not need), and the model's diagnostics.

An interrupted run goes on where it stopped (:func:`resumable`): a new campaign imports every
label the run's records hold, its model on them is scored again in place of the last record,
and the labeling goes on with the label noise generator advanced past the labels already drawn,
so the run labels exactly the points it would have labeled with the noise it would have drawn.
Only the MCMC draws of the models after the interruption differ from an uninterrupted run.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import numpy as np

from fbgp_al.clients.client import ApiError, FbgpClient, Pending, check_refit
from fbgp_al.clients.reproduction.protocol import ITERATIONS, PROTOCOLS, campaign_body, run_setup
from fbgp_al.clients.reproduction.results import run_key
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.worker.vocabulary.defaults import INITIAL_DESIGN_SIZE, MCMC_PRESETS

log = logging.getLogger("fbgp.bench")


class Interrupted(Exception):
    """The run was asked to stop (the benchmark is being interrupted)."""


# the settings that define a run's protocol (protocol.PROTOCOLS), as its records carry them;
# ``service_acquisition`` is the acquisition the campaign ran (``bald`` may run ``bald-code``)
SETTINGS = ("mcmc", "allow_repeats", "service_acquisition", "input_scaling", "initial_design")


@dataclass(frozen=True)
class RunSpec:
    """One run: ``iterations`` labels after the initial design, MCMC preset ``mcmc``;
    ``allow_repeats``: pool points may be labeled again (the campaign setting); ``bald``: the
    service acquisition that runs for ``acquisition`` ``bald``; ``input_scaling``: the
    campaign's; ``initial_design``: ``pool`` or ``continuous``
    (:func:`clients.reproduction.protocol.run_setup`)."""

    simulator: str
    acquisition: str
    run: int
    iterations: int
    mcmc: str = "paper"
    base_seed: int = 0
    allow_repeats: bool = False
    bald: str = "bald"
    input_scaling: str = "box"
    initial_design: str = "pool"

    @property
    def service_acquisition(self) -> str:
        return self.bald if self.acquisition == "bald" else self.acquisition

    @property
    def settings(self) -> dict:
        """What defines the run's protocol, as its records carry it (:data:`SETTINGS`)."""
        return {name: getattr(self, name) for name in SETTINGS}

    @property
    def protocol(self) -> str:
        """The name of the protocol the run's settings are (``custom``: none of them)."""
        mine = {name: getattr(self, name) for name in PROTOCOLS["paper"]}
        return next((name for name, p in PROTOCOLS.items() if p == mine), "custom")

    def record_fields(self) -> dict:
        """The protocol fields every record of the run carries."""
        return {**self.settings, "protocol": self.protocol}

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.simulator, self.acquisition, self.run)

    @property
    def max_labels(self) -> int:
        return INITIAL_DESIGN_SIZE + self.iterations

    @property
    def label(self) -> str:
        return f"{self.simulator}/{self.acquisition}/run{self.run}"


def record_settings(record: dict) -> dict:
    """:data:`SETTINGS` of a record; a field it lacks (files written before it existed) reads
    as today's default (``mcmc``: ``?``, which matches no preset)."""
    return {
        "mcmc": record.get("mcmc", "?"),
        "allow_repeats": record.get("allow_repeats", False),
        "service_acquisition": record.get("service_acquisition", record.get("acquisition")),
        "input_scaling": record.get("input_scaling", "box"),
        "initial_design": record.get("initial_design", "pool"),
    }


def setup_for(spec: RunSpec):
    """The run's :class:`~clients.reproduction.protocol.RunSetup`: the repetition's, shared by
    every acquisition of it."""
    return run_setup(spec.simulator, spec.run, spec.base_seed, spec.initial_design)


def parse_iterations(value: str) -> int | None:
    """``paper`` -> None (each simulator's own count), else a positive integer."""
    if value == "paper":
        return None
    count = int(value)
    if count < 1:
        raise ValueError("iterations must be at least 1")
    return count


def iterations_for(simulator: str, iterations: int | None) -> int:
    return ITERATIONS[simulator] if iterations is None else iterations


def paper_body(
    simulator: str,
    acquisition: str,
    run: int,
    iterations: int | None = None,
    mcmc: str = "paper",
    base_seed: int = 0,
    allow_repeats: bool = False,
    input_scaling: str = "box",
) -> dict:
    """:func:`clients.reproduction.protocol.campaign_body` with the iteration count, MCMC preset,
    whether pool points may be labeled again and the input scaling (the field is sent only
    when it is not the default ``box``). ``acquisition`` is the service's."""
    body = campaign_body(simulator, acquisition, run, base_seed)
    body["max_labels"] = INITIAL_DESIGN_SIZE + iterations_for(simulator, iterations)
    body["mcmc"] = dict(MCMC_PRESETS[mcmc])
    body["allow_repeats"] = allow_repeats
    if input_scaling != "box":
        body["input_scaling"] = input_scaling
    return body


def spec_body(spec: RunSpec) -> dict:
    """The ``POST /campaigns`` body of ``spec``'s run."""
    body = paper_body(
        spec.simulator,
        spec.service_acquisition,
        spec.run,
        spec.iterations,
        spec.mcmc,
        spec.base_seed,
        spec.allow_repeats,
        spec.input_scaling,
    )
    body["name"] = f"bench-{spec.simulator}-{spec.acquisition}-run{spec.run}"
    return body


def label_rng(seed: int, acquisition: str) -> np.random.Generator:
    """The noise of a run's acquired labels: seeded by the run and the acquisition, so a rerun
    labels the same points the same way (crc32: ``hash()`` is salted per process)."""
    return np.random.default_rng([seed, zlib.crc32(acquisition.encode())])


def _replay(spec: RunSpec, records: list[dict], sim, setup):
    """How far ``records`` (some of one run's) carry the run: ``(prefix, labels, rng)``.

    ``prefix``: the records of model versions 3, 4, ... up to the first that is missing or does
    not fit: made with other protocol settings (:data:`SETTINGS`) or setup seed, a first record
    without the run's
    initial design, a later one whose single label the run's noise generator does not
    reproduce. ``labels``: ``(x, y)`` of each prefix record, or of the initial design when the
    prefix is empty. ``rng``: the label noise generator advanced past the prefix's labels.
    """
    by_n = {r["n_labeled"]: r for r in records if run_key(r) == spec.key}
    rng = label_rng(setup.seed, spec.acquisition)
    prefix, labels = [], []
    for n in range(INITIAL_DESIGN_SIZE, spec.max_labels + 1):
        record = by_n.get(n)
        if (
            record is None
            or record_settings(record) != spec.settings
            or record.get("seed") != setup.seed
        ):
            break
        try:
            x = sim.check_inputs(record["x"])
            y = np.asarray(record["y"], dtype=float)
            if n == INITIAL_DESIGN_SIZE:
                expected_x, expected_y, drawn = setup.initial_x, setup.initial_y, rng
            else:
                drawn = copy.deepcopy(rng)  # advanced only if the label is the run's
                expected_x, expected_y = x[:1], sim.sample(x[:1], drawn)
        except (KeyError, TypeError, ValueError):
            break
        if x.shape != expected_x.shape or y.shape != expected_y.shape:
            break
        if not (
            np.allclose(x, expected_x, rtol=1e-12, atol=0)
            and np.allclose(y, expected_y, rtol=1e-9, atol=1e-12)
        ):
            break
        prefix.append(record)
        labels.append((x, y))
        rng = drawn
    return prefix, labels or [(setup.initial_x, setup.initial_y)], rng


def resumable(spec: RunSpec, records: list[dict]) -> list[dict]:
    """The records of ``spec``'s run in ``records`` that an interrupted run goes on from
    (:func:`_replay`'s prefix; ``[]``: start over)."""
    if not any(run_key(r) == spec.key for r in records):
        return []
    return _replay(spec, records, get_simulator(spec.simulator), setup_for(spec))[0]


def run_campaign(
    api: FbgpClient,
    spec: RunSpec,
    on_record: Callable[[dict], None],
    stop: threading.Event | None = None,
    wait: float = 10.0,
    keep: bool = False,
    done: list[dict] | None = None,
) -> str:
    """Run ``spec`` on a new campaign, calling ``on_record`` with each model version's record
    (:mod:`clients.reproduction.results` fields plus diagnostics). Returns the campaign id. The
    campaign is deleted at the end, also after an error, unless ``keep``.

    ``done``: records of this run from an earlier, interrupted attempt. The campaign starts
    from their labels, the model on them is scored again (a new record for the last of them)
    and the run goes on from there (:func:`resumable` says which records qualify)."""
    sim = get_simulator(spec.simulator)
    setup = setup_for(spec)
    campaign = api.create_campaign(spec_body(spec)).id
    try:
        labels, rng = _replay(spec, done or [], sim, setup)[1:]
        _label_and_score(api, campaign, spec, labels, rng, setup, sim, on_record, stop, wait)
    finally:
        if not keep:
            _delete(api, campaign)
    return campaign


def _delete(api: FbgpClient, campaign: str) -> None:
    """Best effort: a cleanup that fails must not hide why the run ended."""
    try:
        api.delete_campaign(campaign, missing_ok=True)
    except (ApiError, httpx.TransportError) as error:
        log.warning("could not delete campaign %s: %s", campaign, error)


def _label_and_score(api, campaign, spec, labels, rng, setup, sim, on_record, stop, wait) -> None:
    """Import ``labels`` (the initial design, then one label per model version), then label
    and score until ``spec.max_labels``, drawing label noise from ``rng``."""
    started = time.perf_counter()
    api.import_observations(
        campaign, np.concatenate([x for x, _ in labels]), np.concatenate([y for _, y in labels])
    )
    new_x, new_y = labels[-1][0].tolist(), labels[-1][1].tolist()
    n = INITIAL_DESIGN_SIZE + len(labels) - 1
    while True:
        if stop is not None and stop.is_set():
            raise Interrupted
        point = None
        if n < spec.max_labels:  # sequential mode: the point comes from the model that saw n
            point = api.next_point(campaign, wait=wait, on_wait=_watch(api, campaign, n, stop))
            if point is None:
                raise RuntimeError(f"campaign {campaign} is done at {n} labels")
        else:
            _wait_for_last_model(api, campaign, n, stop)
        record = score(api, campaign, setup, n)
        record.update(
            simulator=spec.simulator,
            acquisition=spec.acquisition,
            run=spec.run,
            **spec.record_fields(),
            seed=setup.seed,
            campaign=campaign,
            x=new_x,
            y=new_y,
            max_labels=spec.max_labels,
            seconds=time.perf_counter() - started,
            finished_at=time.time(),
        )
        on_record(record)
        if point is None:
            return
        y = float(sim.sample(np.array([point.x]), rng)[0])
        api.label(campaign, point.ticket, y)
        n, started = n + 1, time.perf_counter()
        new_x, new_y = [point.x], [y]


def _watch(api: FbgpClient, campaign: str, version: int, stop: threading.Event | None):
    """An ``on_wait`` for ``/next``: give up when stopped or when the refit failed for good."""

    def on_wait(_: Pending) -> None:
        if stop is not None and stop.is_set():
            raise Interrupted
        check_refit(api.campaign(campaign), version)

    return on_wait


def _wait_for_last_model(api, campaign, version, stop) -> None:
    while True:
        if stop is not None and stop.is_set():
            raise Interrupted
        try:
            api.wait_for_model(campaign, version, timeout=5.0)
            return
        except TimeoutError:
            continue


def score(api: FbgpClient, campaign: str, setup, n: int) -> dict:
    """The record fields of the campaign's current model, which must have seen ``n`` labels."""
    model = api.model(campaign)
    test = api.evaluate(campaign, setup.test_x, setup.test_y)
    prediction = api.predict(campaign, setup.rmse_x)
    # /predict and /evaluate answer with the model of the moment: all three must be version n
    _check_version(campaign, n, model.version, test.model_version, prediction.model_version)
    rmse = float(np.sqrt(np.mean((np.asarray(prediction.mean) - setup.rmse_mean) ** 2)))
    return {
        "n_labeled": n,
        "nlml": test.nlml,
        # the paper code's test NLML (noise counted twice, the mode's log-prior terms), where
        # the service sends it
        **({} if test.nlml_paper is None else {"nlml_paper": test.nlml_paper}),
        "rmse": rmse,
        "nlpd_mixture": test.nlpd_mixture,
        "model_version": model.version,
        "max_rhat": model.max_rhat,
        "min_ess": model.min_ess,
        "divergences": model.divergences,
        "refit_seconds": model.refit_seconds,
    }


def _check_version(campaign: str, n: int, *versions: int | None) -> None:
    if any(v is not None and v != n for v in versions):
        raise RuntimeError(
            f"campaign {campaign}: scored model versions {versions}, wanted {n} "
            "(is something else labeling it?)"
        )
