"""``fbgp-al up``: Redis with append-only persistence and a password, the API and one pinned
worker per core (:class:`clients.ops.stack.LocalStack`), started as child processes, started again
when one exits, and stopped together on Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

from fbgp_al.clients.ops import described
from fbgp_al.clients.ops.stack import LOOPBACK, PASSWORD_FILE, LocalStack, port_in_use
from fbgp_al.clients.simulators import MULTI_SIMULATORS, SIMULATORS

RESTARTS_PER_MINUTE = 5  # more, and `fbgp-al up` gives up on a process that cannot run


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def hold_data_dir(data_dir: Path):
    """An exclusive lock on ``data_dir`` (its ``.lock`` file) for as long as the returned file
    stays open: a second ``fbgp-al up`` on the same data would start a second Redis on the
    same append-only file. The lock ends with the process, however it ends."""
    import fcntl

    data_dir.mkdir(parents=True, exist_ok=True)
    handle = open(data_dir / ".lock", "a+")  # noqa: SIM115 (held open on purpose)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise SystemExit(
            f"fbgp-al: another fbgp-al up (pid {holder}) uses {data_dir}; stop it "
            "first, or give this one another --data-dir"
        ) from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def parse_cpus(text: str, allowed: set[int]) -> list[int]:
    """The cores of ``--cpus`` (``"1"``, ``"0,2"``, ``"2-3"`` or a mix), sorted, each one of
    ``allowed`` (the cores this process may run on); ValueError says what is wrong."""
    cores: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{text!r}: cores are numbers, ranges (2-3) and lists (0,2)")
        span = range(int(first), int(last if dash else first) + 1)
        if not span:
            raise ValueError(f"{part.strip()!r}: a range runs upwards")
        cores.update(span)
    if not cores <= allowed:
        others = ", ".join(map(str, sorted(cores - allowed)))
        raise ValueError(f"core(s) {others} not available here (these are: {_listed(allowed)})")
    return sorted(cores)


def _listed(cores) -> str:
    return ",".join(map(str, sorted(cores)))


def main(argv=None) -> None:
    allowed = os.sched_getaffinity(0)
    parser = argparse.ArgumentParser(prog="fbgp-al up", description=described(__doc__))
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        default=_listed(allowed),
        help="the cores the workers are pinned to, one worker per core in turn: 1, 0,2 or 2-3; "
        "give two stacks on one machine different cores [every core this process may use]",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="one per core of --cpus by default"
    )
    parser.add_argument("--port", type=int, default=8000, help="the API's port on loopback [8000]")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("fbgp-data"),
        help="Redis's append-only file, its password and the logs [./fbgp-data]",
    )
    demos = SIMULATORS + MULTI_SIMULATORS
    parser.add_argument(
        "--demo",
        metavar="SIMULATOR",
        choices=demos,
        help=f"then run a demo campaign: one of {', '.join(demos)}",
    )
    parser.add_argument(
        "--demo-labels", type=int, default=15, help="labels of the demo campaign [15]"
    )
    parser.add_argument(
        "--exit-after-demo",
        action="store_true",
        help="stop the stack once the demo campaign is done",
    )
    parser.add_argument("--redis-port", type=int, default=None, help="a free port by default")
    parser.add_argument(
        "--redis-bind",
        metavar="ADDR",
        default=LOOPBACK,
        help="Redis listens here too (a private interface, for workers on other "
        "machines); loopback only by default",
    )
    parser.add_argument(
        "--redis-tls",
        action="store_true",
        help="Redis speaks TLS only (rediss://), with a CA and a certificate made once into "
        "DATA_DIR/tls and kept; every part checks Redis's certificate against tls/ca.crt",
    )
    parser.add_argument(
        "--print-redis-url",
        action="store_true",
        help="print the Redis URL for workers on other machines with its "
        "password (by default, the password's file is named)",
    )
    args = parser.parse_args(argv)
    try:
        cores = parse_cpus(args.cpus, allowed)
    except ValueError as error:
        parser.error(f"--cpus {error}")
    if args.workers is None:
        args.workers = len(cores)
    for stop in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (&)
        signal.signal(stop, _interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # a closed terminal; nohup stays
        signal.signal(signal.SIGHUP, _interrupt)
    if port_in_use(LOOPBACK, args.port):
        raise SystemExit(f"fbgp-al: port {args.port} is in use; choose another with --port")
    lock = hold_data_dir(args.data_dir)  # noqa: F841 (held while this process runs)
    stack = LocalStack(
        args.data_dir,
        workers=args.workers,
        port=args.port,
        cores=cores,
        redis_port=args.redis_port,
        redis_bind=args.redis_bind,
        tied=True,
        redis_tls=args.redis_tls,
    )
    exits: dict[str, list[float]] = {}
    try:
        stack.start(ready=False)
        stack.wait_ready(
            workers=1,
            note="fbgp-al: waiting for a worker (a first start on this "
            "machine compiles the sampler's kernels: a minute or more)",
        )
        over = "" if stack.tls is None else " (TLS only)"
        print(
            f"fbgp-al: API on {stack.url} (docs: {stack.url}/docs), Redis on "
            f"127.0.0.1:{stack.redis_port}{over} with data in {args.data_dir}, {args.workers} "
            f"worker(s) on core(s) {_listed(cores)}; logs in {args.data_dir}; Ctrl-C stops it all",
            flush=True,
        )
        # the password stays out of this output (and of logs of it) unless asked for
        password = stack.redis_password if args.print_redis_url else "PASSWORD"
        remote = stack.redis_url_for(stack.remote_redis_host()).replace(
            stack.redis_password, password
        )
        told = f"fbgp-al: Redis requires the password in {args.data_dir / PASSWORD_FILE}"
        if stack.tls is not None:
            told += (
                f" and TLS, its certificate signed by the CA in {stack.tls.ca}, which a "
                "worker on another machine needs as FBGP_REDIS_CA_FILE"
            )
        if stack.redis_bind == (LOOPBACK,):
            print(
                f"{told} (FBGP_REDIS_URL={remote}); it listens on loopback only: "
                "--redis-bind ADDR lets workers on other machines join",
                flush=True,
            )
        else:
            print(
                f"{told}; a worker on another machine joins with FBGP_REDIS_URL={remote} "
                "fbgp-al worker",
                flush=True,
            )
        if args.demo:
            from fbgp_al.clients.ops.http_demo import run_demo

            run_demo(stack.url, args.demo, args.demo_labels, token=os.environ.get("FBGP_API_TOKEN"))
            if args.exit_after_demo:
                return
        while True:  # keep it all running: what exits is started again, within reason
            time.sleep(1.0)
            now = time.monotonic()
            for name in stack.restart_dead():
                exits[name] = [t for t in exits.get(name, []) if now - t < 60.0] + [now]
                if len(exits[name]) > RESTARTS_PER_MINUTE:
                    print(
                        f"fbgp-al: {name} exited {len(exits[name])} times in a minute; "
                        f"stopping (see {args.data_dir / name}.log)",
                        flush=True,
                    )
                    raise SystemExit(1)
                print(f"fbgp-al: {name} exited; started it again", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        # a second Ctrl-C would break off the stop half-way; kill -9 still ends it all at once
        for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(stop, signal.SIG_IGN)
        stopping = "the API and the workers (a refit that runs may take up to a minute), then Redis"
        print(f"fbgp-al: stopping {stopping}", flush=True)
        stack.stop()
