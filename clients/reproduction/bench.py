"""``fbgp-al bench --url URL [...]``: the paper's experiments against a running service.

For each repetition x simulator x acquisition (in that order, so that every cell of the table
has a run early) a campaign is created, its repetition's initial design imported, and it is
labeled by the built-in simulator for the chosen number of iterations; every model version is
scored (NLML, RMSE, diagnostics, refit seconds: :mod:`clients.reproduction.runs`).
``--parallel K`` campaigns run at once (threads; default: as many as the service has workers, so
that all of them stay busy).

Results go to ``OUT/results.jsonl`` (:mod:`clients.reproduction.results`'s format), one line per
scored model, appended as they come. Resuming: run the same command again. Runs that are complete in
the file (a record for every model version up to the requested iteration count) are skipped;
a run that was interrupted, or failed, goes on from its last scored model on a new campaign
that starts from the run's labels so far (:func:`clients.reproduction.runs.resumable`; records
that do not fit the run are removed from the file first, and a run without a usable first record
starts over). A complete run made with another MCMC preset is an error rather than silently
mixed in: use another ``--out``; so is one made with other protocol settings
(``--protocol`` and the options it sets: :data:`clients.reproduction.protocol.PROTOCOLS`, which
every record carries). SIGTERM stops the bench as Ctrl-C does.

At the end (and with ``--report-only``): ``rdauc.md`` / ``rdauc.json`` (RD-AUC beside the
paper's Table 2), ``learning_curves.png`` and ``summary.md`` (which of the paper's claims held),
from everything in the results file.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.reproduction.protocol import INITIAL_DESIGNS, INPUT_SCALINGS, PROTOCOLS, RUNS
from fbgp_al.clients.reproduction.report import write_report
from fbgp_al.clients.reproduction.results import append_record, run_key, validate
from fbgp_al.clients.reproduction.runs import (
    SETTINGS,
    Interrupted,
    RunSpec,
    iterations_for,
    parse_iterations,
    record_settings,
    resumable,
    run_campaign,
)
from fbgp_al.clients.simulators import SIMULATORS
from fbgp_al.worker.vocabulary.defaults import (
    ACQUISITIONS,
    INITIAL_DESIGN_SIZE,
    MCMC_PRESETS,
    PAPER_ACQUISITIONS,
)

# what --acquisitions also takes beyond the paper's five: random, and BALD as the paper's code
# computes it
OTHER_ACQUISITIONS = tuple(a for a in ACQUISITIONS if a not in PAPER_ACQUISITIONS)

RESULTS = "results.jsonl"
# the service acquisitions the table's ``bald`` column may run
BALDS = ("bald", "bald-code")


def _names(value: str, known: tuple[str, ...], extra: tuple[str, ...] = ()) -> list[str]:
    """``all`` (the ``known`` ones) or a comma-separated list of ``known`` or ``extra`` ones."""
    names = known if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(names) - set(known) - set(extra))
    if unknown:
        allowed = ", ".join((*known, *extra))
        raise argparse.ArgumentTypeError(f"unknown {unknown}; known: {allowed}")
    return list(names)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fbgp-al bench",
        description="the paper's experiments against a running service; resumable",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service")
    parser.add_argument("--token", help="bearer token (default: FBGP_API_TOKEN)")
    parser.add_argument(
        "--simulators",
        default="all",
        type=lambda v: _names(v, SIMULATORS),
        help=f"comma-separated, or 'all': {','.join(SIMULATORS)}",
    )
    parser.add_argument(
        "--acquisitions",
        default="all",
        type=lambda v: _names(v, PAPER_ACQUISITIONS, OTHER_ACQUISITIONS),
        help=f"comma-separated, or 'all': {','.join(PAPER_ACQUISITIONS)}; also "
        f"{' and '.join(OTHER_ACQUISITIONS)} (bald-std: BALD as the "
        "paper's code computes it)",
    )
    parser.add_argument("--runs", type=int, default=RUNS, help="repetitions 0..RUNS-1")
    parser.add_argument(
        "--iterations",
        default="paper",
        type=parse_iterations,
        help="labels after the initial design: 'paper' or a number",
    )
    parser.add_argument(
        "--protocol",
        default="paper",
        choices=list(PROTOCOLS),
        help="the settings of the five options below unless given: "
        + "; ".join(f"{k}: {v}" for k, v in PROTOCOLS.items()),
    )
    parser.add_argument(
        "--mcmc",
        choices=list(MCMC_PRESETS),
        help="MCMC preset; " + "; ".join(f"{k}: {v}" for k, v in MCMC_PRESETS.items()),
    )
    parser.add_argument(
        "--allow-repeats",
        action=argparse.BooleanOptionalAction,
        help="pool points may be labeled again, as in the paper's code, which "
        "scores the whole grid every iteration",
    )
    parser.add_argument(
        "--bald",
        choices=BALDS,
        help="the service acquisition the 'bald' column runs (bald-code: BALD "
        "as the paper's code computes it); records keep 'bald'",
    )
    parser.add_argument(
        "--input-scaling",
        choices=INPUT_SCALINGS,
        help="box: inputs scaled by the declared bounds; labels: min-max by the "
        "labeled inputs at each refit, as the paper's code",
    )
    parser.add_argument(
        "--initial-design",
        choices=INITIAL_DESIGNS,
        help="pool: the repetition's maximin LHS snapped to the pool; "
        "continuous: the same LHS, not snapped, as the paper's "
        "code",
    )
    parser.add_argument("--parallel", type=int, help="campaigns at once (default: the workers)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the runs' setups")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--wait", type=float, default=10.0, help="seconds per long poll")
    parser.add_argument("--keep-campaigns", action="store_true", help="do not delete them")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--report-only", action="store_true", help="only write the report")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The options, with each protocol setting not given taken from ``--protocol``."""
    parser = _parser()
    args = parser.parse_args(argv)
    for name, value in PROTOCOLS[args.protocol].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.mcmc not in MCMC_PRESETS:
        parser.error(
            f"--protocol {args.protocol}: MCMC preset {args.mcmc!r} is not one of "
            f"this service's ({', '.join(MCMC_PRESETS)})"
        )
    return args


def plan(args) -> list[RunSpec]:
    """Every run asked for, repetition-major."""
    return [
        RunSpec(
            sim,
            acq,
            run,
            iterations_for(sim, args.iterations),
            args.mcmc,
            args.seed,
            args.allow_repeats,
            args.bald,
            args.input_scaling,
            args.initial_design,
        )
        for run in range(args.runs)
        for sim in args.simulators
        for acq in args.acquisitions
    ]


def _read(path: Path) -> tuple[list[dict], int]:
    """The file's records, and how many lines did not parse (cut short by a kill mid-write)."""
    if not path.exists():
        return [], 0
    records, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError):
            bad += bool(line.strip())
    return records, bad


def _rewrite(path: Path, records: list[dict]) -> None:
    """Replace the file atomically (a crash leaves the old file or the new one)."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
    os.replace(tmp, path)


def resume(path: Path, specs: list[RunSpec]) -> tuple[list[RunSpec], dict[tuple, list[dict]]]:
    """The runs still to do, and the records each of them goes on from (``[]``: from the
    start). The file keeps those records but the last (its model is scored again when the run
    goes on); other records of the runs to do are removed from it."""
    records, bad = _read(path)
    by_run: dict[tuple, list[dict]] = {}
    for r in records:
        by_run.setdefault(run_key(r), []).append(r)
    todo, done = [], {}
    for spec in specs:
        mine = by_run.get(spec.key, [])
        wanted = set(range(INITIAL_DESIGN_SIZE, spec.max_labels + 1))
        if wanted <= {r["n_labeled"] for r in mine}:
            _same_protocol(path, spec, mine)
            continue
        todo.append(spec)
        done[spec.key] = resumable(spec, mine)
    going_on = {id(r) for records in done.values() for r in records[:-1]}
    kept = [r for r in records if run_key(r) not in done or id(r) in going_on]
    if bad or len(kept) < len(records):
        _rewrite(path, kept)
    return todo, done


def _same_protocol(path: Path, spec: RunSpec, records: list[dict]) -> None:
    """SystemExit unless every record of ``spec``'s complete run was made with its settings."""
    for name in SETTINGS:
        mine = getattr(spec, name)
        found = {record_settings(r)[name] for r in records}
        if found == {mine}:
            continue
        if name == "allow_repeats":
            how = f"{'without' if mine else 'with'} --allow-repeats"
        elif name == "mcmc":
            how = f"with MCMC {found}, not {mine!r}"
        elif name == "service_acquisition":
            how = f"with the service acquisition {found}, not {mine!r} (--bald)"
        else:
            how = f"with --{name.replace('_', '-')} {found}, not {mine!r}"
        raise SystemExit(f"{path}: {spec.label} was run {how}; use another --out")


class _Bench:
    """Runs specs on a thread pool: one progress bar overall and one per running campaign."""

    def __init__(
        self,
        args,
        path: Path,
        todo: list[RunSpec],
        done: dict[tuple, list[dict]],
        parallel: int,
        workers: int,
    ):
        self.args, self.path, self.todo, self.parallel = args, path, todo, parallel
        self.done, self.workers = done, workers
        self.lock = threading.Lock()  # the results file and the bars
        self.stop = threading.Event()
        self.slots: queue.Queue[int] = queue.Queue()
        for slot in range(1, parallel + 1):
            self.slots.put(slot)
        self.disable = True if args.no_progress else None  # None: bars only on a terminal
        total = sum(s.iterations + 1 - self._scored(s) for s in todo)
        self.overall = tqdm(
            total=total,
            desc="bench",
            unit="model",
            position=0,
            disable=self.disable,
            dynamic_ncols=True,
        )

    def _scored(self, spec: RunSpec) -> int:
        """Models of ``spec``'s run kept from an earlier attempt (its last one is scored again)."""
        return max(len(self.done.get(spec.key, [])) - 1, 0)

    def _run(self, spec: RunSpec) -> None:
        slot = self.slots.get()
        bar = tqdm(
            total=spec.iterations + 1,
            initial=self._scored(spec),
            desc=spec.label,
            unit="model",
            position=slot,
            leave=False,
            disable=self.disable,
            dynamic_ncols=True,
        )

        def on_record(record: dict) -> None:
            record["workers"] = self.workers
            with self.lock:
                append_record(self.path, record)
                bar.set_postfix(nlml=f"{record['nlml']:.3f}", rmse=f"{record['rmse']:.3g}")
                bar.update()
                self.overall.update()

        try:
            with FbgpClient(self.args.url, self.args.token) as api:
                run_campaign(
                    api,
                    spec,
                    on_record,
                    self.stop,
                    self.args.wait,
                    self.args.keep_campaigns,
                    self.done.get(spec.key),
                )
        finally:
            bar.close()
            self.slots.put(slot)

    def run(self) -> list[tuple[RunSpec, Exception]]:
        """Run every spec; returns the failed ones. Ctrl-C stops the runs and exits."""
        failures = []
        executor = ThreadPoolExecutor(self.parallel, thread_name_prefix="bench")
        futures = {executor.submit(self._run, spec): spec for spec in self.todo}
        on_term = _sigterm_as_interrupt()
        try:
            for future in as_completed(futures):
                spec = futures[future]
                try:
                    future.result()
                    tqdm.write(f"bench: {spec.label} done ({spec.iterations} iterations)")
                except Interrupted:
                    pass
                except Exception as error:
                    failures.append((spec, error))
                    tqdm.write(f"bench: {spec.label} FAILED: {type(error).__name__}: {error}")
        except KeyboardInterrupt:
            self.stop.set()
            tqdm.write(
                "bench: interrupted; stopping the runs in progress (the same command "
                "goes on with them from their last scored model)"
            )
            executor.shutdown(wait=True, cancel_futures=True)
            raise SystemExit(130) from None
        finally:
            executor.shutdown(wait=True)
            self.overall.close()
            if on_term is not None:
                signal.signal(signal.SIGTERM, on_term)
        return failures


def _sigterm_as_interrupt():
    """Make SIGTERM stop the bench as Ctrl-C does; returns the handler it replaced (None where
    it cannot: outside the main thread)."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, interrupt)


def _header(argv: list[str], args, todo: int, seconds: float, parallel: int, workers) -> str:
    mcmc = MCMC_PRESETS[args.mcmc]
    iterations = "the paper's" if args.iterations is None else str(args.iterations)
    settings = {k: getattr(args, k) for k in PROTOCOLS[args.protocol]}
    custom = "" if settings == PROTOCOLS[args.protocol] else ", with the options given"
    return "\n".join(
        [
            f"Command: `fbgp-al bench {shlex.join(argv)}`",
            "",
            f"- protocol `{args.protocol}`{custom}: the `bald` column runs the service's "
            f"`{args.bald}`; inputs scaled by "
            f"{'the labeled inputs at each refit' if args.input_scaling == 'labels' else 'the box'}"
            "; initial design "
            + (
                "snapped to the pool"
                if args.initial_design == "pool"
                else "continuous (not snapped)"
            ),
            f"- MCMC preset `{args.mcmc}`: {mcmc['chains']} chains, {mcmc['warmup']} warm-up + "
            f"{mcmc['samples']} kept NUTS steps, thinning {mcmc['thinning']}, cold chains started "
            + (
                "uniformly in [-2, 2]"
                if mcmc.get("init") == "uniform"
                else "from the posterior grid"
            )
            + f"{'' if mcmc.get('warm_start', True) else ', every refit cold'}",
            "- pool points labeled at most once"
            if not args.allow_repeats
            else "- pool points may be labeled again (`--allow-repeats`)",
            f"- simulators {', '.join(args.simulators)}; acquisitions "
            f"{', '.join(args.acquisitions)}; {args.runs} repetition(s); {iterations} iterations",
            f"- this invocation: {todo} runs in {seconds / 60:.1f} min, {parallel} campaigns at "
            f"once on {workers} workers"
            if not args.report_only
            else "- this invocation: the report only, from the results file "
            "(the time of its runs is below)",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / RESULTS
    started = time.perf_counter()
    todo, failures, parallel, workers = [], [], 0, "?"
    if not args.report_only:
        todo, done = resume(path, plan(args))
        with FbgpClient(args.url, args.token) as api:
            try:
                workers = api.wait_ready(timeout=120).workers
            except TimeoutError as error:
                raise SystemExit(f"bench: {error}") from None
        parallel = max(1, args.parallel or workers)
        skipped = len(plan(args)) - len(todo)
        resumed = sum(bool(records) for records in done.values())
        going_on = f", {resumed} going on from where they stopped" if resumed else ""
        print(
            f"bench: {len(todo)} runs to do ({skipped} done already{going_on}), {parallel} at "
            f"once, {workers} workers; results in {path}",
            flush=True,
        )
        if todo:
            failures = _Bench(args, path, todo, done, parallel, workers).run()
    if not path.exists():
        raise SystemExit(f"bench: no results in {path} to report on")
    header = _header(
        argv, args, len(todo) - len(failures), time.perf_counter() - started, parallel, workers
    )
    claims = write_report(path, args.out, header)
    print("\nThe paper's claims:")
    for claim in claims:
        print(f"  {claim.verdict:>10}: {claim.text}. {claim.evidence}.")
    print(f"bench: table, plots and summary in {args.out}", flush=True)
    if failures:
        raise SystemExit(f"bench: {len(failures)} runs failed; run the same command to redo them")
