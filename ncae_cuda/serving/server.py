"""The served app on uvicorn: listening on a socket bound before it starts (so port 0 gets a
free port the ready line can name), SIGHUP reloading the model, SIGTERM or Ctrl-C answering the
requests in flight before the process exits with status 0."""
from __future__ import annotations

import asyncio
import logging
import signal
import socket

from ..errors import NcaeError

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)
log = logging.getLogger("ncae_cuda.serve")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening (port 0: a free one); NcaeError where it
    cannot be."""
    try:
        family, kind, proto, _, _ = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                       proto=socket.IPPROTO_TCP)[0]
        # proto TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
        # and without it a keep-alive connection's next answer waits 40 ms for a delayed ACK
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # listening at once: SO_REUSEADDR lets sockets that do not listen yet share a port, so
        # a second server could bind it until uvicorn starts, and uvloop lets the listen that
        # then fails pass (a ready line, and nothing reaches it)
        sock.listen()
    except OSError as e:
        raise NcaeError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                        errno=e.errno) from None
    return sock


def serve(app, holder, sock: socket.socket) -> None:
    """Run until SIGTERM or SIGINT, printing `serving MODEL on http://HOST:PORT` once
    connections are accepted."""
    # the [serve] extra, imported here so that the module imports without it
    import uvicorn
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            loop = asyncio.get_running_loop()
            log.info("event loop: %s.%s", type(loop).__module__, type(loop).__qualname__)
            loop.add_signal_handler(signal.SIGHUP, holder.reload_soon)
            await super().startup(sockets=sockets)
            if self.started:
                print(f"serving {holder.path} on http://{shown}:{port}", flush=True)

    server = Server(uvicorn.Config(app, access_log=False, lifespan="on",
                                   timeout_graceful_shutdown=None))
    # uvicorn catches these while it runs and raises them again once it has shut down, to the
    # handlers it found: these ones, so a drained shutdown ends the process with status 0
    for sig in SHUTDOWN_SIGNALS:
        signal.signal(sig, lambda signum, frame: None)
    # uvicorn's own run, on the event loop its Config picks: uvloop's where it is installed
    # (asyncio.run would make asyncio's own, and uvloop would never be used)
    server.run(sockets=[sock])
