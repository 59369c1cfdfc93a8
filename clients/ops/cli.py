"""The ``fbgp-al`` command. Each sub-command imports what it needs only when it runs, so that a
worker sets its thread counts and core before torch is imported."""

from __future__ import annotations

import argparse
import os
import sys

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)


def _bench_core(argv: list[str]) -> None:
    from fbgp_al.clients.reproduction.core_benchmark import main

    main(argv)


def _bench_service(argv: list[str]) -> None:
    from fbgp_al.clients.ops.service_benchmark import main

    main(argv)


def _demo(argv: list[str]) -> None:
    from fbgp_al.clients.reproduction.demo import main

    main(argv)


def _simulate(argv: list[str]) -> None:
    from fbgp_al.clients.ops.simulate import main

    main(argv)


def _run(argv: list[str]) -> None:
    from fbgp_al.clients.ops.run import main

    main(argv)


def _report(argv: list[str]) -> None:
    from fbgp_al.clients.ops.report import main

    main(argv)


def _bench(argv: list[str]) -> None:
    from fbgp_al.clients.reproduction.bench import main

    main(argv)


def _bench_failures(argv: list[str]) -> None:
    from fbgp_al.clients.reproduction.failure_regions import main

    main(argv)


def _bench_anywhere(argv: list[str]) -> None:
    from fbgp_al.clients.reproduction.anywhere_bench import main

    main(argv)


def _bench_fidelity(argv: list[str]) -> None:
    from fbgp_al.clients.reproduction.fidelity_bench import main

    main(argv)


def _soak(argv: list[str]) -> None:
    from fbgp_al.clients.ops.soak_command import main

    main(argv)


def _label_path(argv: list[str]) -> None:
    from fbgp_al.clients.ops.label_path import main

    sys.exit(main(argv))


def _imports(argv: list[str]) -> None:
    from fbgp_al.clients.ops.imports import main

    raise SystemExit(main(argv))


def worker_parser() -> argparse.ArgumentParser:
    """``fbgp-al worker``'s options (tests/test_kubernetes.py reads the manifests' by it)."""
    parser = argparse.ArgumentParser(prog="fbgp-al worker", description="one RQ worker")
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core")
    parser.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    parser.add_argument("--name", default=None)
    parser.add_argument(
        "--light",
        action="store_true",
        help="never take the long refits' queue: keep this worker for short jobs and ordinary "
        "refits, so that small campaigns always find one",
    )
    return parser


def _worker(argv: list[str]) -> None:
    args = worker_parser().parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    for variable in THREAD_VARIABLES:  # before torch, numpy and numba start their thread pools
        os.environ[variable] = "1"
    from fbgp_al.service.jobs.process import run_worker  # imports torch: only now

    run_worker(name=args.name, burst=args.burst, light=args.light)


def api_parser() -> argparse.ArgumentParser:
    """``fbgp-al api``'s options (tests/test_kubernetes.py reads the manifests' by it)."""
    parser = argparse.ArgumentParser(prog="fbgp-al api", description="the HTTP API")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default=os.environ.get("FBGP_API_LOOP", "auto"),
        help="the event loop (default: uvloop where installed; env FBGP_API_LOOP)",
    )
    parser.add_argument(
        "--http",
        choices=("auto", "h11", "httptools"),
        default=os.environ.get("FBGP_API_HTTP", "auto"),
        help="the HTTP parser (default: httptools where installed; env FBGP_API_HTTP)",
    )
    return parser


def _api(argv: list[str]) -> None:
    args = api_parser().parse_args(argv)
    from fbgp_al.service.observability import json_logging
    from fbgp_al.service.server import serve

    json_logging()  # one JSON line per request, from the app's middleware
    # uvicorn, closing connections whose headers come too slowly (FBGP_HEADER_TIMEOUT_SECONDS)
    serve(args.host, args.port, loop=args.loop, http=args.http)


def healthcheck_parser() -> argparse.ArgumentParser:
    """``fbgp-al healthcheck``'s options (tests/test_kubernetes.py reads the probes' by it)."""
    parser = argparse.ArgumentParser(prog="fbgp-al healthcheck")
    parser.add_argument("role", nargs="?", default="auto", choices=("auto", "api", "worker"))
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    return parser


def _healthcheck(argv: list[str]) -> None:
    """Exit 0 when the role is healthy (for container health checks): ``api``, the API answers
    /healthz at ``--url``; ``worker``, a worker of this host has a fresh heartbeat in Redis;
    ``auto`` (the default, the image's HEALTHCHECK: one image runs either role), either."""
    args = healthcheck_parser().parse_args(argv)

    def api_answers() -> bool:
        import httpx

        try:  # nothing listening (a worker's container) is refused at once
            return httpx.get(f"{args.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def worker_alive() -> bool:
        import socket
        from datetime import UTC, datetime, timedelta

        from redis import Redis
        from redis.exceptions import RedisError

        from fbgp_al.service.queues import workers as registered
        from fbgp_al.service.settings import get_settings

        settings = get_settings()
        connection = Redis.from_url(
            settings.redis_url,
            socket_timeout=2,
            socket_connect_timeout=2,
            **settings.redis_options(),
        )
        fresh = datetime.now(UTC) - timedelta(seconds=120)
        try:
            workers = registered(connection)
        except RedisError:
            return False
        mine = [w for w in workers if w.hostname == socket.gethostname()]
        return any(w.last_heartbeat and w.last_heartbeat.replace(tzinfo=UTC) > fresh for w in mine)

    healthy = (args.role in ("api", "auto") and api_answers()) or (
        args.role in ("worker", "auto") and worker_alive()
    )
    raise SystemExit(0 if healthy else 1)


def _export(argv: list[str]) -> None:
    """``fbgp-al export``: a campaign's latest model as a self-contained JSON file, for
    :class:`clients.metamodel.Metamodel` (the SDK alone runs it: httpx and numpy)."""
    parser = argparse.ArgumentParser(
        prog="fbgp-al export", description="save a campaign's model to predict without the service"
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service")
    parser.add_argument("--campaign", required=True, help="the campaign's id")
    parser.add_argument(
        "--token", help="its owner token or the service's (default: FBGP_API_TOKEN)"
    )
    parser.add_argument(
        "--out",
        help="the file to write, '-' for stdout (default: fbgp-al-ID-model-VERSION.json here)",
    )
    args = parser.parse_args(argv)
    import json

    from fbgp_al.clients.client import ApiError, FbgpClient

    try:
        with FbgpClient(args.url, args.token) as api:
            document = api.export_model(args.campaign)
    except ApiError as error:
        raise SystemExit(f"fbgp-al export: {error}") from None
    if args.out == "-":
        json.dump(document, sys.stdout)
        sys.stdout.write("\n")
        return
    out = args.out or f"fbgp-al-{args.campaign}-model-{document['version']}.json"
    with open(out, "w") as f:
        json.dump(document, f)
    print(
        f"fbgp-al export: model {document['version']} of campaign {args.campaign} "
        f"({document['n_labeled']} labels) -> {out}",
        file=sys.stderr,
    )


def _team(argv: list[str]) -> None:
    """``fbgp-al team``: make, list, re-key and delete the teams of a shared stack (the service
    token's calls)."""
    parser = argparse.ArgumentParser(
        prog="fbgp-al team",
        description="teams of a shared stack: a team's token creates campaigns, lists its own "
        "and opens those, and nothing of another team's",
    )
    parser.add_argument(
        "action",
        choices=("create", "list", "rotate", "delete"),
        help="create NAME (prints its token), list, rotate NAME (a new token; "
        "the old one stops working), delete NAME (its token ends; its campaigns "
        "stay)",
    )
    parser.add_argument("name", nargs="?", help="the team's name")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service")
    parser.add_argument("--token", help="the service token (default: FBGP_API_TOKEN)")
    args = parser.parse_args(argv)
    if args.action != "list" and not args.name:
        parser.error(f"{args.action} needs the team's NAME")
    from fbgp_al.clients.client import ApiError, FbgpClient

    try:
        with FbgpClient(args.url, args.token) as api:
            if args.action == "list":
                for team in api.teams():
                    count = team["n_campaigns"]
                    state = "" if team["live"] else "\tdeleted (rotate makes it live again)"
                    turns = f"\ttenant {team['tenant']}" if "tenant" in team else ""
                    print(
                        f"{team['name']}\t{count} campaign{'' if count == 1 else 's'}{turns}{state}"
                    )
            elif args.action == "delete":
                api.delete_team(args.name)
                print(
                    f"fbgp-al team: the token of {args.name} ended (its campaigns stay)",
                    file=sys.stderr,
                )
            else:
                make = api.create_team if args.action == "create" else api.rotate_team_token
                print(make(args.name))  # the token alone on stdout, for a script to keep
                print(
                    f"fbgp-al team: the token of team {args.name} is shown once: give it to "
                    "the team (FBGP_API_TOKEN on its side)",
                    file=sys.stderr,
                )
    except ApiError as error:
        raise SystemExit(f"fbgp-al team: {error}") from None


def _redis_certs(argv: list[str]) -> None:
    from fbgp_al.clients.ops.tls import main

    main(argv)


def _up(argv: list[str]) -> None:
    from fbgp_al.clients.ops.up import main

    main(argv)


COMMANDS = {
    "up": (_up, "the whole stack on this machine: Redis, the API and pinned workers"),
    "api": (_api, "the HTTP API alone"),
    "worker": (_worker, "one worker, pinned to a core, one torch thread"),
    "healthcheck": (_healthcheck, "exit 0 if this host's api or worker is healthy"),
    "redis-certs": (_redis_certs, "a CA and certificates for a Redis with TLS (rediss://)"),
    "bench-core": (_bench_core, "time the NUTS refit and scoring against the paper's Pyro path"),
    "bench-service": (_bench_service, "latency of /next and /label, and label-to-next time"),
    "demo": (_demo, "an active-learning run on a built-in simulator, in process"),
    "simulate": (_simulate, "a built-in simulator labeling a campaign as a remote simulator would"),
    "run": (_run, "any executable as a simulator: fbgp-al run --url U --campaign ID -- cmd {x1}"),
    "team": (_team, "teams of a shared stack: create, list, rotate or delete a team's token"),
    "export": (_export, "a campaign's model as a file the SDK's Metamodel predicts from"),
    "report": (_report, "a campaign as one self-contained HTML file: plots, indices, data"),
    "bench": (_bench, "the benchmark client: the paper's experiments against a running service"),
    "bench-failures": (
        _bench_failures,
        "simulators failing around their steepest part, at a face or a corner, and a "
        "mixed-input one, with the failure model and without",
    ),
    "bench-anywhere": (
        _bench_anywhere,
        "the next point from the pool, the pool polished, or the box, side by side in process",
    ),
    "bench-fidelity": (
        _bench_fidelity,
        "multi-fidelity active learning against single-fidelity over cost, side by side in "
        "process, on the literature's two-level problems",
    ),
    "soak": (_soak, "a bounded soak test: simulators label while workers, Redis and the API die"),
    "imports": (_imports, "the import graph of the product's modules, checked against its rules"),
    "label-path": (_label_path, "the modules one label goes through, to its next model, traced"),
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="fbgp-al",
        description="Bayesian active learning with fully Bayesian GPs: a labeling service.",
    )
    parser.add_argument(
        "command",
        choices=list(COMMANDS),
        help="; ".join(f"{name}: {text}" for name, (_, text) in COMMANDS.items()),
    )
    args = parser.parse_args(argv[:1])
    COMMANDS[args.command][0](argv[1:])


if __name__ == "__main__":
    main()
