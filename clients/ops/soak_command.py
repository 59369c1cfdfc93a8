"""``fbgp-al soak``'s command line: the soak of :mod:`clients.ops.soak`, with ``--adversarial``
the greedy tenant's test of :mod:`clients.ops.adversarial`, or with ``--churn`` what a campaign
keeps in Redis per ended ticket and evaluation (:mod:`clients.ops.churn`)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from fbgp_al.clients.ops import adversarial, churn, described, soak, soak_report


def _write(out: Path | None, report: dict, text: str) -> None:
    """The summary and the figures as JSON on stdout, and the JSON into ``out`` if given."""
    figures = json.dumps(report, indent=2)
    print(text)
    print(figures)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(figures + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fbgp-al soak", description=described(soak.__doc__))
    parser.add_argument("--seconds", type=float, default=180.0, help="labeling time")
    parser.add_argument("--campaigns", type=int, default=3)
    parser.add_argument("--simulators", type=int, default=2, help="per campaign")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-labels", type=int, help="per campaign (default: 1.5 * seconds)")
    parser.add_argument(
        "--faults",
        default=",".join(soak.FAULT_KINDS),
        help="the fault kinds, in order (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, help="the stack's data and logs (default: temp)")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    memory = "also Redis's memory: at the start, its peak, once the refits have ended, 70 s later"
    parser.add_argument("--memory", action="store_true", help=memory)
    parser.add_argument(
        "--adversarial",
        action="store_true",
        help="instead: a well-behaved campaign alone, then beside a greedy "
        "tenant (clients/ops/adversarial.py); --seconds per phase",
    )
    parser.add_argument(
        "--churn",
        type=int,
        metavar="CYCLES",
        help="instead: CYCLES /next+/abandon and /next+/fail cycles and "
        "--evaluations /evaluate calls, and the bytes each keeps in Redis "
        "(clients/ops/churn.py)",
    )
    parser.add_argument(
        "--evaluations", type=int, default=300, help="with --churn: /evaluate calls [300]"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="with --churn: a setting for the stack (FBGP_NAME), e.g. keep_runs=100; repeatable",
    )
    args = parser.parse_args(argv)
    logging.getLogger("fbgp.client").setLevel(logging.ERROR)  # retries are expected here
    if args.churn is not None:
        settings = dict(item.split("=", 1) for item in args.set)
        report = churn.run_churn(args.churn, args.evaluations, args.data_dir, settings)
        _write(args.out, report, churn.summary(report))
        return 0
    if args.adversarial:
        report = adversarial.run_adversarial(args.seconds, args.workers, args.seed, args.data_dir)
        _write(args.out, report, adversarial.summary(report))
        if not report["met"]:
            raise SystemExit(1)
        return 0
    report = soak.run_soak(
        args.seconds,
        args.campaigns,
        args.simulators,
        args.workers,
        args.data_dir,
        args.seed,
        max_labels=args.max_labels,
        faults=tuple(k for k in args.faults.split(",") if k),
        memory=args.memory,
    )
    _write(args.out, report, soak_report.summary(report))
    if soak_report.failed(report):
        raise SystemExit(1)
    return 0
