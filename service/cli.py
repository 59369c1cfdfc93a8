"""The ``fbgp-al`` command. Each sub-command imports what it needs only when it runs, so that,
for example, a worker can set its thread count before torch is imported."""

from __future__ import annotations

import argparse
import sys


def _bench_core(argv: list[str]) -> None:
    from clients.core_benchmark import main

    main(argv)


def _demo(argv: list[str]) -> None:
    from clients.demo import main

    main(argv)


COMMANDS = {
    "bench-core": (_bench_core, "time the NUTS refit and scoring against the paper's Pyro path"),
    "demo": (_demo, "an active-learning run on a built-in simulator, in process"),
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="fbgp-al",
        description="Bayesian active learning with fully Bayesian GPs: a labeling service.",
    )
    parser.add_argument(
        "command",
        choices=sorted(COMMANDS),
        help="; ".join(f"{name}: {text}" for name, (_, text) in sorted(COMMANDS.items())),
    )
    args, rest = parser.parse_known_args(argv[:1])
    COMMANDS[args.command][0](argv[1:])


if __name__ == "__main__":
    main()
