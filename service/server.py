"""The API's HTTP server (``fbgp-al api``): uvicorn, whose HTTP protocols here also close a
connection whose request line and headers are not all in within ``header_timeout_seconds``.

Uvicorn's own ``timeout_keep_alive`` covers only an idle connection between requests: a client
that sends its headers a byte every few seconds would hold a connection for ever. The deadline
runs from the connection's opening, and from the first byte of each later request, to the end
of its headers; a slow body is :class:`service.middleware.BodyDeadline`'s.

An idle connection between two requests is closed after ``keep_alive_seconds``: longer than
httpx keeps one (5 s), so a client of the SDK never sends a request on a connection that the
server is closing at that moment (a race uvicorn's default of 5 s leaves open)."""

from __future__ import annotations

import asyncio
import importlib.util

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from fbgp_al.service.settings import get_settings


class HeaderDeadline:
    """The timer of a protocol below: armed from the connection's opening, and from each later
    request's first byte, until that request's headers are in."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc) -> None:
        self._headers_in()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        if self._header_timer is None:
            seconds = get_settings().header_timeout_seconds
            self._header_timer = self.loop.call_later(seconds, self._headers_too_slow)

    def _headers_in(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class H11HeaderDeadline(HeaderDeadline, H11Protocol):
    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # a request's first bytes
            self._await_headers()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # its headers are in
            self._headers_in()


def _httptools_protocol() -> type | None:
    if importlib.util.find_spec("httptools") is None:
        return None
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HttpToolsHeaderDeadline(HeaderDeadline, HttpToolsProtocol):
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._await_headers()

        def on_headers_complete(self) -> None:
            self._headers_in()
            super().on_headers_complete()

    return HttpToolsHeaderDeadline


def protocol(http: str = "auto") -> type[asyncio.Protocol]:
    """The protocol class for uvicorn's ``http`` choice: ``h11``, ``httptools``, or ``auto``
    (httptools where installed)."""
    if http not in ("auto", "h11", "httptools"):
        raise ValueError(f"http must be auto, h11 or httptools, not {http!r}")
    fast = _httptools_protocol() if http != "h11" else None
    if http == "httptools" and fast is None:
        raise RuntimeError("httptools is not installed")
    return fast or H11HeaderDeadline


def config(
    app="fbgp_al.service.main:app",
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    loop: str = "auto",
    http: str = "auto",
    **more,
) -> uvicorn.Config:
    """Uvicorn's configuration for the API (or for ``app``), with :func:`protocol`."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        timeout_keep_alive=get_settings().keep_alive_seconds,
        log_config=None,
        access_log=False,
        loop=loop,
        http=protocol(http),
        **more,
    )


def serve(host: str, port: int, *, loop: str = "auto", http: str = "auto") -> None:
    uvicorn.Server(config(host=host, port=port, loop=loop, http=http)).run()
