"""The listening socket, bound before anything else starts: a port out of range, a port in use or an address
this machine does not have is one line naming the fix (exit code 2 from ``bertkit serve``), before the model
loads. uvicorn binds by itself only once its loop runs, and on failure exits the process while the loading
thread is inside torch, which aborted it (SIGABRT)."""

from __future__ import annotations

import errno
import socket

from bertkit.errors import ConfigError

BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (uvicorn's default)."""


def check_port(port: int) -> None:
    """A TCP port is 1 to 65535 (0 would take any free port, which no client could be told)."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port; give one from 1 to 65535 (e.g. --port 8000)")


def _why(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is in use by another process; stop it or give another --port"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"--host {host} is not an address of this machine; give one of its addresses, or 0.0.0.0 for all"
    if exc.errno == errno.EACCES:
        return f"port {port} needs administrator rights here; give a port above 1023"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (not yet listening: the server's loop does that), or a
    ``ConfigError`` that says why not."""
    check_port(port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"--host {host} is not an address or a name this machine resolves ({exc})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart reuses a port left in TIME_WAIT
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(_why(exc, host, port)) from None
    sock.set_inheritable(True)
    return sock
