"""Requests a second and latency of python -m ncae_cuda.serve under load, beside what bounds it.

    python -m bench.serve_load --out bench/results/run --device gpu --data-dir ~/data
    python -m bench.serve_load --out /tmp/s --quick                      # a smoke test

For each shape (ML-100K's implicit model, hidden 128: ML-100K where --data-dir or
$NCAE_CUDA_DATA holds it, else the synthetic data set of its density; and the synthetic
Delicious shape, 69,226 items, hidden 500) it trains a model for an epoch (the rates do not
depend on how well), saves it and starts the server on it on a free loopback port (with
--index, a second one beside it, answering through the approximate index). Then, for
1, 8 and 64 concurrent clients (each a keep-alive connection; the clients shared among
--client-processes processes), GET /recommend?user=U&n=N for users in a seeded order, and
GET /healthz, the trivial endpoint (the HTTP floor: what the server answers when scoring costs
nothing). Each level ends after --requests requests or --seconds, whichever comes first.
Reported: requests/s (one user a request), p50 and p99 latency, the mean batch the server
scored, beside the offline rate of NCAE.recommend for the same users on the same device; and
the targets: at the most clients, served users/s at least half the lower of the offline rate
and the floor; one client's p50 at most 2 ms above the floor's. Writes serve_load.json and
serve_load.md under --out with the machine, the versions and the commit, again after each
server (a time limit that stops the command keeps the servers it finished).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import multiprocessing
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from bench.cli import (add_quick, check_devices, integers, number, out_folder, parse,
                       said_when_interrupted, write_results)
from bench.epoch_time import commit
from ncae_cuda import NCAE, cli
from ncae_cuda.data import datasets
from ncae_cuda.model.ann import IndexUnavailable, faiss_module
from ncae_cuda.runs.environment import describe, device_facts, versions

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"ML-100K implicit, hidden 128": ("ml-100k", "synthetic", (128,)),
          "Delicious (synthetic), hidden 500": ("synthetic-delicious", None, (500,))}
QUICK_SHAPE = ("synthetic-tiny", None, (8,))
QUICK = {"clients": "1,4", "requests": 40, "seconds": 2.0, "client_processes": 1}
OFFLINE_USERS = 4096              # users in the offline recommend call, at most
OFFLINE_REPEATS = 3
LATENCY_MARGIN_MS = 2.0           # one client's p50 above the floor's, at most
POLL = 0.1                        # seconds: the parent's wait for its clients, a wait at a time
THROUGHPUT_SHARE = 0.5            # of the lower of the offline rate and the floor, at least
CONTENT_LENGTH = re.compile(rb"content-length:\s*(\d+)", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# the clients


async def _connection(host: str, port: int, paths: list[str], deadline: float,
                      latencies: list[float]) -> int:
    """GET each path on one keep-alive connection until the deadline; returns non-200s."""
    reader, writer = await asyncio.open_connection(host, port)
    errors = 0
    for path in paths:
        if time.perf_counter() > deadline:
            break
        start = time.perf_counter()
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(CONTENT_LENGTH.search(head).group(1)))
        latencies.append(time.perf_counter() - start)
        errors += not head.startswith(b"HTTP/1.1 200")
    writer.close()
    return errors


def clients_here(host, port, shares: list[list[str]], seconds: float, barrier=None) -> tuple:
    """This process's connections, each GETting its share of paths, started together with the
    other processes' (the barrier): (requests, errors, latencies, wall start, wall end)."""
    async def run():
        latencies: list[float] = []
        if barrier is not None:
            barrier.wait()
        start = time.time()
        deadline = time.perf_counter() + seconds
        errors = await asyncio.gather(*(_connection(host, port, paths, deadline, latencies)
                                        for paths in shares))
        return len(latencies), sum(errors), latencies, start, time.time()
    return asyncio.run(run())


def client_process(host, port, shares: list[list[str]], seconds: float, barrier, results):
    results.put(clients_here(host, port, shares, seconds, barrier))


@contextlib.contextmanager
def sigint_held():
    """Within it, processes started keep SIGINT blocked from their start (a mask kept across
    exec: a terminal's Ctrl-C, which reaches them too, is the bench's alone), and a Ctrl-C to
    the bench waits: it is raised as the block ends, each process started whole and known.
    Blocked in this thread, a signal goes to another (Numba's, asyncio's), whose Python
    handler runs in this one all the same: it is held by a handler of its own here (before,
    raised within a client's start, that client ran on unknown to the bench)."""
    held = []
    before = signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, before)
    if held:
        signal.raise_signal(signal.SIGINT)


@contextlib.contextmanager
def clients_started(workers):
    """Within it, the client processes run, SIGINT blocked in each (sigint_held), and they are
    joined at its end, a Ctrl-C there ending them first. Before, each printed a
    KeyboardInterrupt traceback of its own at a terminal's Ctrl-C, and a parent signalled alone
    waited for them to run out their --seconds."""
    try:
        with sigint_held():
            for worker in workers:
                worker.start()
        yield
    except KeyboardInterrupt:
        for worker in workers:
            if worker.pid is not None:
                worker.terminate()
        raise
    finally:
        for worker in workers:
            if worker.pid is not None:
                worker.join()


def load(url: str, paths: list[str], clients: int, processes: int, seconds: float) -> dict:
    """`clients` connections sharing `paths` (each a share in turn), in `processes` processes:
    requests/s over the whole window, p50 and p99 latency in ms, non-200 answers."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    shares = [paths[k::clients] for k in range(clients)]
    processes = min(processes, clients)
    if processes == 1:
        done = [clients_here(host, int(port), shares, seconds)]
    else:            # spawned: the parent's Numba threads are not forked into the children
        context = multiprocessing.get_context("spawn")
        barrier, results = context.Barrier(processes), context.Queue()
        workers = [context.Process(target=client_process, args=(
            host, int(port), shares[k::processes], seconds, barrier, results))
            for k in range(processes)]
        with clients_started(workers):
            done = []
            while len(done) < processes:
                # in short waits: a signal another thread takes (tqdm's monitor's) interrupts
                # no read of this one, and is raised here only between two
                with contextlib.suppress(queue.Empty):
                    done.append(results.get(timeout=POLL))
    requests = sum(d[0] for d in done)
    latencies = np.concatenate([d[2] for d in done]) * 1000                 # (requests,) ms
    window = max(d[4] for d in done) - min(d[3] for d in done)
    return {"clients": clients, "requests": requests, "seconds": window,
            "requests_per_s": requests / window, "errors": sum(d[1] for d in done),
            "p50_ms": float(np.percentile(latencies, 50)),
            "p99_ms": float(np.percentile(latencies, 99))}


# ---------------------------------------------------------------------------------------------
# the server and the model


@contextlib.contextmanager
def served(model: Path, device: str, flags: list[str]):
    """The URL of python -m ncae_cuda.serve on a free loopback port, serving within it. The
    server's stderr is the bench's, so that why it did not start is in the log; a Ctrl-C is
    the bench's alone (sigint_held), which ends the server at once, with no line after its own
    (before, uvicorn's "Shutting down" lines, of the terminal's Ctrl-C or of the SIGTERM that
    ends it; it holds nothing to keep)."""
    # the caller's PYTHONPATH kept behind the repository (carried wheels: the serve extra)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    with sigint_held():
        process = subprocess.Popen(
            [sys.executable, "-m", "ncae_cuda.serve", str(model), "--port", "0", "--device",
             device, *flags], stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": path})
    try:
        line = process.stdout.readline()          # the ready line, or "" if it failed
        if not line.startswith("serving "):
            raise SystemExit(f"the server did not start on {model} (its error is above)")
        yield line.split()[-1]
    except KeyboardInterrupt:
        process.kill()
        raise
    finally:
        process.terminate()                       # (none sent where it has ended)
        process.wait(60)
        process.stdout.close()


def health(url: str) -> dict:
    """The server's /healthz."""
    with urllib.request.urlopen(url + "/healthz", timeout=60) as response:
        return json.loads(response.read())


def offline_rate(model: NCAE, users: np.ndarray, n: int, index: str = "exact") -> float:
    """Users a second of one recommend call for `users`, median of OFFLINE_REPEATS, after a
    warm-up call (JIT or kernel compilation, the index's build)."""
    model.recommend(users, n=n, index=index)
    seconds = []
    for _ in range(OFFLINE_REPEATS):
        start = time.perf_counter()
        model.recommend(users, n=n, index=index)       # returns host arrays: synchronized
        seconds.append(time.perf_counter() - start)
    return len(users) / statistics.median(seconds)


def shape_data(dataset: str, fallback: str | None, data_dir: Path | None):
    """The shape's data set, or its synthetic stand-in where the published one is not here."""
    if fallback is not None and data_dir is None and not os.environ.get(datasets.DATA_ENV):
        return fallback, datasets.load(fallback)
    return dataset, datasets.load(dataset, data_dir=data_dir)


def measure_shape(name: str, hidden: tuple, used: str, data, args, folder: Path):
    """A model of the shape (its hidden widths, on `data`, the data set `used`), trained and
    saved, served through each of args.indexes: yields one result each, as it is measured."""
    model = NCAE(device=args.device, feedback="implicit", hidden=hidden).fit(
        data, epochs=1, verbose=False)
    path = folder / f"{used}.npz"
    model.save(path)
    users = np.random.default_rng(0).permutation(model.user_ids)
    base = {"shape": name, "dataset": used, "users": data.n_users, "items": data.n_items,
            "hidden": list(hidden)}
    for index in args.indexes:
        yield measure_server({**base, "index": index}, model, path, users, args)


def measure_server(result: dict, model: NCAE, path: Path, users: np.ndarray, args) -> dict:
    """The levels of the server on `path` answering through result['index']."""
    index = result["index"]
    result["offline_users_per_s"] = offline_rate(model, users[:OFFLINE_USERS], args.n, index)
    order = np.resize(users, args.requests)                      # (requests,) cycled
    paths = {"recommend": [f"/recommend?user={u}&n={args.n}" for u in order],
             "healthz": ["/healthz"] * args.requests}
    result["levels"] = []
    with served(path, args.device, [*args.server_flags, "--index", index]) as url:
        for clients in args.clients:
            for endpoint, wanted in paths.items():
                before = health(url)
                level = load(url, wanted, clients, args.client_processes, args.seconds)
                after = health(url)
                batches = after["batches"] - before["batches"]
                level.update(endpoint=endpoint, mean_batch=(
                    (after["users_scored"] - before["users_scored"]) / batches
                    if batches else None))
                result["levels"].append(level)
                print(f"{result['shape']} | index {index} | {endpoint} | {clients} clients: "
                      f"{level['requests_per_s']:.0f} req/s, p50 {level['p50_ms']:.2f} ms, "
                      f"p99 {level['p99_ms']:.2f} ms", flush=True)
    result["targets"] = targets(result)
    return result


def targets(result: dict) -> dict:
    """The issue's two targets, checked on this shape's levels."""
    at = {(level["endpoint"], level["clients"]): level for level in result["levels"]}
    most = max(level["clients"] for level in result["levels"])
    floor = at["healthz", most]["requests_per_s"]
    served = at["recommend", most]["requests_per_s"]
    bound = THROUGHPUT_SHARE * min(result["offline_users_per_s"], floor)
    found = {"clients": most, "served_users_per_s": served, "throughput_bound": bound,
             "throughput_met": served >= bound}
    if ("recommend", 1) in at:
        gap = at["recommend", 1]["p50_ms"] - at["healthz", 1]["p50_ms"]
        found.update(p50_gap_ms=gap, latency_met=gap <= LATENCY_MARGIN_MS)
    return found


def table(result: dict) -> list[str]:
    lines = [(f"## {result['shape']} ({result['dataset']}: {result['users']} users x "
              f"{result['items']} items), index {result['index']}"), "",
             ("Offline `recommend`, same users, same device: "
              f"{result['offline_users_per_s']:.0f} users/s."), "",
             "| endpoint | clients | requests/s | p50 ms | p99 ms | mean batch | errors |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for level in result["levels"]:
        batch = "" if level["mean_batch"] is None else f"{level['mean_batch']:.1f}"
        lines.append(f"| {level['endpoint']} | {level['clients']} | "
                     f"{level['requests_per_s']:.0f} | {level['p50_ms']:.2f} | "
                     f"{level['p99_ms']:.2f} | {batch} | {level['errors']} |")
    t = result["targets"]
    lines += ["", (f"- at {t['clients']} clients: {t['served_users_per_s']:.0f} users/s "
                   f"served, target >= {t['throughput_bound']:.0f}: "
                   f"{'met' if t['throughput_met'] else 'missed'}")]
    if "p50_gap_ms" in t:
        lines.append(f"- one client's p50 above the floor's: {t['p50_gap_ms']:.2f} ms, target "
                     f"<= {LATENCY_MARGIN_MS} ms: {'met' if t['latency_met'] else 'missed'}")
    return lines + [""]


def markdown(result: dict) -> str:
    """serve_load.md: the machine, then a table per server measured."""
    lines = ["# python -m ncae_cuda.serve under load", "",
             (f"- {result['machine']}; commit {result['commit']}, {result['date']}; "
              f"top-{result['n']} a request, one user each"), ""]
    for shape in result["shapes"]:
        lines += table(shape)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for serve_load.json and .md")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                   help="the backend the models train and serve on (default: %(default)s)")
    p.add_argument("--data-dir", type=Path, help="the folder that holds ml-100k/")
    p.add_argument("-n", type=cli.count, default=10, help="items a request (default: %(default)s)")
    p.add_argument("--clients", type=integers(1), default="1,8,64",
                   help="concurrent clients of each level (default: %(default)s)")
    p.add_argument("--requests", type=cli.count, default=20_000,
                   help="a level's requests at most (default: %(default)s)")
    p.add_argument("--seconds", type=number(0.1), default=10.0,
                   help="a level's seconds at most, 0.1 or more (default: %(default)s)")
    p.add_argument("--client-processes", type=cli.count,
                   default=max(1, min(4, (os.cpu_count() or 1) // 4)),
                   help="processes the clients are shared among (default: %(default)s)")
    p.add_argument("--server-flags", default="",
                   help="more flags of python -m ncae_cuda.serve, e.g. '--max-wait-ms 2' "
                        "(default: none)")
    p.add_argument("--index", action="store_true",
                   help="also a server answering through the approximate index (--index "
                        "approximate, the [ann] extra), beside the exact one")
    add_quick(p, "a tiny model", QUICK)
    args = parse(p, argv, QUICK)
    check_devices(p, [args.device])
    if args.index:                        # said now, not after the exact path's server
        try:
            faiss_module()
        except IndexUnavailable as e:
            p.error(f"--index: {e}")
    shapes = {"tiny (quick)": QUICK_SHAPE} if args.quick else SHAPES
    # every shape's data before any work: a --data-dir without ML-100K refused in its line
    data = {name: cli.refused(p, shape_data, dataset, fallback, args.data_dir)
            for name, (dataset, fallback, _) in shapes.items()}
    out_folder(p, args.out)
    with said_when_interrupted(args.out, "serve_load"):
        args.server_flags = args.server_flags.split()
        args.indexes = ["exact", "approximate"] if args.index else ["exact"]
        facts = device_facts(args.device)
        result = {"commit": commit(), "date": datetime.date.today().isoformat(),
                  "device": args.device, "machine": describe(args.device, facts), "facts": facts,
                  "versions": versions(), "n": args.n, "server_flags": args.server_flags,
                  "client_processes": args.client_processes, "shapes": []}
        planned = len(shapes) * len(args.indexes)
        with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
            for name, (_, _, hidden) in shapes.items():
                for server in measure_shape(name, hidden, *data[name], args, Path(folder)):
                    result["shapes"].append(server)
                    write_results(args.out, "serve_load", result, markdown(result),   # after each
                                  (len(result["shapes"]), planned, "servers measured"))
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
