"""The log files of a local stack's parts (:class:`clients.ops.stack.LocalStack`, which
``fbgp-al up`` runs): each part's stdout and stderr go through a pipe to the stack's own process,
which appends them line by line to ``NAME.log`` in the data directory and rotates it by size.

Past ``log_file_bytes`` the file becomes ``NAME.log.1`` (``.1`` becomes ``.2``, and so on; the
oldest beyond ``log_file_backups`` is deleted) and a new ``NAME.log`` starts, so that a part's
logs take at most ``(log_file_backups + 1) x log_file_bytes`` of disk whatever it writes. One
writer per file does the rotation, between two lines, so no line is lost or split at a rotation
(a worker and its work horses share one pipe: what each writes comes whole up to 4 KiB, the
pipe's atomic size; the JSON lines of :class:`service.observability.JsonFormatter` are shorter
but for a traceback). A line longer than :data:`MAX_LINE_BYTES` (a part's own print, which no
formatter cut) is cut there and marked so.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import BinaryIO

MAX_LINE_BYTES = 64 * 1024
CUT = b" [cut: the line was longer than %d bytes]\n" % MAX_LINE_BYTES


class RotatingLog:
    """``path``, appended to line by line from the pipes of the parts that write it
    (:meth:`pump`), rotated past ``max_bytes`` with ``backups`` older files kept."""

    def __init__(self, path: Path, max_bytes: int, backups: int):
        self.path, self.max_bytes, self.backups = Path(path), max_bytes, backups
        self._lock = threading.Lock()
        self._file = open(self.path, "ab")  # noqa: SIM115 (closed in close)
        self._size = self._file.tell()
        self._pumps: list[threading.Thread] = []

    def write(self, line: bytes) -> None:
        """Append one whole line (rotating first if it would pass ``max_bytes``)."""
        with self._lock:
            if self._file.closed:  # a part's orphan, writing after the stack stopped
                return
            if self._size and self._size + len(line) > self.max_bytes:
                self._rotate()
            self._file.write(line)
            self._file.flush()
            self._size += len(line)

    def _rotate(self) -> None:
        self._file.close()
        for k in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{k}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{k + 1}"))
        if self.backups > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._file = open(self.path, "wb")  # noqa: SIM115 (closed in close or the next rotation)
        self._size = 0

    def pump(self, stream: BinaryIO) -> threading.Thread:
        """Copy ``stream`` (a part's stdout pipe) into this log line by line until it ends, in a
        thread of this process."""
        thread = threading.Thread(
            target=self._copy, args=(stream,), daemon=True, name=f"log {self.path.name}"
        )
        thread.start()
        self._pumps = [t for t in self._pumps if t.is_alive()] + [thread]
        return thread

    def _copy(self, stream: BinaryIO) -> None:
        cutting = False  # the rest of a line cut already
        with stream:
            for chunk in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
                whole = chunk.endswith(b"\n")
                if cutting:
                    cutting = not whole
                    continue
                if not whole:
                    if len(chunk) < MAX_LINE_BYTES:  # the last line, without its newline
                        chunk += b"\n"
                    else:
                        chunk, cutting = chunk + CUT, True
                self.write(chunk)

    def close(self, seconds: float = 5.0) -> None:
        """Once the parts have exited: what their pipes still hold written, the file closed (a
        pipe that a part's orphan still holds open is left after ``seconds``)."""
        for thread in self._pumps:
            thread.join(timeout=seconds)
        with self._lock:
            self._file.close()
