"""Serve a saved model over HTTP, requests batched onto one scoring call ([serve] extra).

    python -m ncae_cuda.serve runs/ncae/model.npz --port 8000
    curl 'http://127.0.0.1:8000/recommend?user=196&n=10'

Endpoints (JSON; /docs lists them): GET /healthz, GET /recommend?user=ID&n=N, POST /recommend
{"users": [...], "n": N, "exclude": [...]}, POST /recommend/new {"items": [...], "n": N},
GET /similar?item=ID&n=N. --index approximate answers /recommend through an inner-product
index of the items (read from beside the model file, or built and saved there, at start and at
each reload). The /recommend requests that arrive within --max-wait-ms of each
other (up to --max-batch users) are scored in one NCAE.recommend call; one that finds none other
waiting, at once. SIGHUP reloads the model
file (one that fails to load leaves the model answering as it was, and the log says why);
SIGTERM answers the requests in flight, then exits. The model is a model.npz or the run folder
that holds it.
"""
from __future__ import annotations

import argparse
import importlib.util
import logging
import math
import sys
from dataclasses import fields

from ..cli import Parser
from ..errors import NcaeError
from ..model import ann
from ..serving import app, holder, server
from ..serving.limits import Limits
from . import flags

MISSING_EXTRA = "python -m ncae_cuda.serve needs the [serve] extra: pip install -e '.[serve]'"
LIMIT_HELP = {"max_n": "the largest n a request may ask for",
              "max_users": "users one POST /recommend may ask for",
              "max_body_bytes": "the largest JSON body a request may send"}


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m ncae_cuda.serve", description=__doc__.split("\n\n")[0])
    flags.add_model_file(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s, this machine only)")
    p.add_argument("--port", type=port, default=8000,
                   help="0 to 65535; 0: a free port, named by the ready line (default: "
                        "%(default)s)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                   help="auto: the GPU when there is one (default: %(default)s)")
    p.add_argument("--max-batch", type=int, default=256,
                   help="users scored in one call at most (default: %(default)s)")
    p.add_argument("--max-wait-ms", type=milliseconds, default=1.0,
                   help="how long the first request of a batch waits for others, where "
                        "others are waiting (default: %(default)s)")
    flags.add_index(p)
    for limit in fields(Limits):
        p.add_argument(f"--{limit.name.replace('_', '-')}", type=int, default=limit.default,
                       help=f"{LIMIT_HELP[limit.name]} (default: %(default)s)")
    return p


def port(text: str) -> int:
    """An argparse type: a TCP port number, 0 to 65535 (0: a free one)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0 to 65535, got {text!r}")
    return value


def milliseconds(text: str) -> float:
    """An argparse type: a batch's window, a finite number of milliseconds >= 0 (a NaN or
    infinite one would hold a batch open for good: its requests would never be answered)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of milliseconds >= 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not all(importlib.util.find_spec(name) for name in ("fastapi", "uvicorn")):
        print(f"error: {MISSING_EXTRA}", file=sys.stderr)
        return 2
    bounds = Limits(**{f.name: getattr(args, f.name) for f in fields(Limits)})
    for name in ("max_batch", *vars(bounds)):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    # faiss's loader logs at INFO which CPU builds it tried and failed to load (a
    # ModuleNotFoundError each), alarming above the index's own line; its warnings stay
    logging.getLogger("faiss").setLevel(logging.WARNING)
    try:
        ann.require(args.index)
        # a port in use said at once, not after the model's load and warm-up (and its index's
        # build: minutes for a large catalogue); the socket served is bound after them, as one
        # bound now would let a second server bind the port meanwhile (SO_REUSEADDR, neither
        # listening yet) and one of the two would print its ready line listening on nothing
        server.listening_socket(args.host, args.port).close()
        served = holder.ModelHolder(args.model, args.device, args.index)
        sock = server.listening_socket(args.host, args.port)
    except NcaeError as e:
        print(f"error: {e.on_command_line()}", file=sys.stderr)
        return 2
    server.serve(app.create_app(served, bounds, args.max_batch, args.max_wait_ms / 1000),
                 served, sock)
    return 0
