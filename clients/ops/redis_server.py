"""A redis-server of the product's own: with a password (made once, kept in its data
directory), an append-only file fsynced on every write, and TLS where asked
(:func:`start_redis`); what :class:`clients.ops.stack.LocalStack` (``fbgp-al up``), the
reliability tests and ``fbgp-al label-path`` start."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from redis import Redis

from fbgp_al.clients.ops.logs import RotatingLog
from fbgp_al.clients.ops.tls import TlsFiles


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on ``host:port``."""
    with socket.socket() as probe:
        return probe.connect_ex((host, port)) == 0


PASSWORD_FILE = "redis-password"
LOOPBACK = "127.0.0.1"
WILDCARDS = ("0.0.0.0", "*", "::", "::*", "-::*")  # every interface: loopback included


def redis_password(data_dir: Path) -> str:
    """The password of the Redis that keeps ``data_dir``: made once (``secrets``) into
    ``data_dir/redis-password`` with mode 0600, and read from there on every later start, so that
    a restarted stack and the workers that joined it keep reaching the data."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            os.chmod(path, 0o600)
            password = path.read_text().strip()
        except PermissionError:
            raise SystemExit(
                f"{path} cannot be read by this user (made by another, e.g. with "
                "sudo?): run as its owner, or give another --data-dir"
            ) from None
        if not re.fullmatch(r"[A-Za-z0-9._~-]{16,}", password):
            raise SystemExit(
                f"{path}: a Redis password is 16 or more letters, digits or . _ ~ -"
                " (remove the file to have one made)"
            ) from None
        return password
    password = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    return password


REDIS_START_SECONDS = 120.0  # a redis-server loading its append-only file answers LOADING


def die_with_parent() -> None:
    """In a child, before it runs: SIGTERM when the process that started it dies, however it
    dies (``kill -9``, a closed terminal), so that no part of a stack outlives it (Linux)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_redis(
    data_dir: Path,
    port: int,
    log: Path,
    *,
    password: str,
    bind: tuple[str, ...] = (LOOPBACK,),
    preexec=None,
    rotating: RotatingLog | None = None,
    tls: TlsFiles | None = None,
    client_cert: TlsFiles | None = None,
) -> subprocess.Popen:
    """A redis-server on ``bind`` (addresses), ``port``, that requires ``password`` and keeps an
    append-only file in ``data_dir``, fsynced on every write (a label is acknowledged only once
    it is on disk). The password goes to it on stdin, never on a command line. ``preexec``:
    run in the child before it starts (:func:`die_with_parent`). It logs to ``log``, or with
    ``rotating`` (whose file is ``log``) to its stdout, which that rotates. With ``tls`` it
    speaks TLS only on ``port`` (no plain-text port), with that certificate; with
    ``client_cert`` (the one this process shows it) it takes only clients that show a
    certificate its CA signed."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on the PATH (Debian: apt-get install redis-server)")
    host = LOOPBACK if bind[0] in WILDCARDS else bind[0]
    if port_in_use(host, port):  # else the ping below could reach another server there
        raise SystemExit(
            f"port {port} is in use (another Redis?); choose another with "
            "--redis-port, or none for a free one"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    # Redis changes into --dir before it opens the log: both must be absolute
    data_dir, log = data_dir.resolve(), log.resolve()
    command = [
        binary,
        "-",
        *_ports(port, tls, client_cert is not None),
        "--bind",
        *bind,
        "--protected-mode",
        "yes",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
        "--logfile",
        "" if rotating else str(log),
    ]
    out = subprocess.DEVNULL if rotating is None else subprocess.PIPE
    # its own process group: a terminal's Ctrl-C (SIGINT to the foreground group) does not stop
    # it under the workers; whoever started it stops it, last
    options = dict(stdin=subprocess.PIPE, stdout=out, preexec_fn=preexec)
    process = subprocess.Popen(command, start_new_session=True, **options)
    if rotating is not None:
        rotating.pump(process.stdout)
    with contextlib.suppress(BrokenPipeError):  # it exited at once: said below
        process.stdin.write(f"requirepass {password}\n".encode())  # "-": config from stdin
        process.stdin.close()
    options = {} if tls is None else {"ssl": True, **tls_options(tls, client_cert)}
    client = Redis(host=host, port=port, password=password, **options)
    deadline = time.monotonic() + REDIS_START_SECONDS
    while time.monotonic() < deadline:  # a large append-only file takes a while to load
        try:
            client.ping()
            return process
        except Exception:
            if process.poll() is not None:
                raise SystemExit(f"redis-server exited; see {log}") from None
            time.sleep(0.05)
    process.terminate()  # not left running behind this stack's back
    process.wait()
    raise SystemExit(
        f"redis-server did not answer on port {port} in {REDIS_START_SECONDS:.0f} s; see {log}"
    )


def _ports(port: int, tls: TlsFiles | None, client_certs: bool) -> list[str]:
    """redis-server's arguments for its port: plain text, or TLS only."""
    if tls is None:
        return ["--port", str(port)]
    return [
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(tls.cert.resolve()),
        "--tls-key-file",
        str(tls.key.resolve()),
        "--tls-ca-cert-file",
        str(tls.ca.resolve()),
        "--tls-auth-clients",
        "yes" if client_certs else "no",
    ]


def tls_options(tls: TlsFiles | None, client_cert: TlsFiles | None = None) -> dict:
    """redis-py's options beside a ``rediss://`` URL for a client of a Redis started with
    ``tls`` (none without), showing ``client_cert`` if given."""
    if tls is None:
        return {}
    options = {"ssl_ca_certs": str(tls.ca), "ssl_check_hostname": True}
    if client_cert is not None:
        options |= {"ssl_certfile": str(client_cert.cert), "ssl_keyfile": str(client_cert.key)}
    return options
