"""Recall@10 of the approximate index against the exact top-k, users/s and one user's latency of
both, at three catalogue shapes; the index's build time and size; and the other library's index.

    python -m bench.ann --out bench/results/run
    python -m bench.ann --out /tmp/a --quick                 # a smoke test: small shapes

Shapes (items x hidden): ML-20M's catalogue (26,744 x 500), Delicious's (69,226 x 500) and a
synthetic catalogue of 1,000,000 items (x 256).

The item vectors are shaped like a trained model's output layer, not i.i.d. noise: items
belong to topics (256 of them, their sizes Zipf-distributed), each topic a centre in a rank-48
subspace of the hidden layer whose axes weigh 1/sqrt(j) (a decaying spectrum); an item is its
topic's centre plus half as much spread in the same subspace, plus a little full-rank noise;
its bias c is 0.3 log of its popularity (Zipf, exponent 0.8), so that popular items score
higher for everyone. A user's code is tanh of two liked topics' centres plus spread and noise,
scaled so that it is as saturated as a trained tanh layer's. Logits are (V, c) . (h, 1).

Exact: the package's exact path, ncae_cuda.model.evaluate.top_m (EVAL_BATCH users a call:
codes @ V^T + c, then the Numba top-k kernel), given the users' codes; the index:
ItemIndex.top on the same queries. Both leave the encoder out (it is the same for both) and no
item is seen (the synthetic users have none). Users/s: --users users in one call; latency: one
user a call, p50 and p99 of --calls calls, and the p50 of as many calls each made with the
caches cold (COLD_BYTES read before it), as a served request meets them. Recall@10: the share
of the exact top 10 that the index finds, over the users. Each shape sweeps the probes
(--probes); the package's default is marked. --libraries adds, at the Delicious shape,
faiss's HNSW and usearch's HNSW (the index usearch has) over the same vectors, with their build
time, recall and users/s.
Writes ann.json and ann.md under --out with the machine, the versions and the commit.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.cli import (add_quick, integers, names, out_folder, parse, said_when_interrupted,
                       write_results)
from bench.epoch_time import provenance, provenance_line
from ncae_cuda import cli
from ncae_cuda.model.ann import CORES, IndexSettings, ItemIndex, faiss_module
from ncae_cuda.model.evaluate import top_m
from ncae_cuda.ops import get_backend
from ncae_cuda.runs.environment import describe, device_facts, versions

SHAPES = {"ML-20M": (26_744, 500), "Delicious": (69_226, 500), "1M synthetic": (1_000_000, 256)}
QUICK_SHAPES = {"quick": (5_000, 64)}
LIBRARIES_SHAPE = "Delicious"        # where --libraries measures faiss's and usearch's HNSW
QUICK = {"users": 64, "calls": 5, "exact_calls": 3}
K = 10                               # recall@K, and the k each user asks for
TOPICS, RANK = 256, 48
COLD_BYTES = 64 << 20                # read between calls: more than the CPU's caches hold


def trained_like(n_items: int, hidden: int, n_users: int, seed: int = 0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(items (n_items, hidden + 1), queries (n_users, hidden + 1)): item vectors (V, c) and
    user queries (h, 1) shaped like a trained model's (the module's docstring says how)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((hidden, RANK)))[0].T.astype(np.float32)
    spectrum = (np.arange(1, RANK + 1) ** -0.5).astype(np.float32)             # (RANK,)

    def in_subspace(rows: int):                                                # (rows, hidden)
        return (rng.standard_normal((rows, RANK), dtype=np.float32) * spectrum) @ basis
    centres = in_subspace(TOPICS)
    share = 1.0 / np.arange(1, TOPICS + 1) ** 0.8
    share /= share.sum()
    topic = rng.choice(TOPICS, n_items, p=share)
    V = centres[topic] + 0.5 * in_subspace(n_items)
    V += 0.1 * rng.standard_normal((n_items, hidden), dtype=np.float32) / np.sqrt(hidden)
    popularity = 1.0 / rng.permutation(np.arange(1, n_items + 1)) ** 0.8
    c = 0.3 * np.log(popularity / popularity.max())
    liked = centres[rng.choice(TOPICS, (n_users, 2), p=share)].sum(axis=1)
    taste = liked + 0.3 * in_subspace(n_users)
    taste *= 2 * np.sqrt(hidden) / np.linalg.norm(taste, axis=1, keepdims=True)
    h = np.tanh(taste + 0.2 * rng.standard_normal((n_users, hidden), dtype=np.float32))
    items = np.hstack([V, c[:, None]]).astype(np.float32)
    return items, np.hstack([h, np.ones((n_users, 1))]).astype(np.float32)


def timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def latency(call, calls: int) -> dict:
    """p50 and p99 ms of `call`, one call at a time, after one warm-up; and the p50 of as many
    calls each made with the caches cold, as a served request finds them (other work ran
    between requests): COLD_BYTES read before each."""
    call(0)
    seconds = [timed(lambda: call(i))[0] for i in range(1, calls + 1)]
    evictor = np.ones(COLD_BYTES, np.uint8)
    cold = []
    for i in range(1, calls + 1):
        evictor.sum()
        cold.append(timed(lambda: call(i))[0])
    return {"p50_ms": 1e3 * float(np.percentile(seconds, 50)),
            "p99_ms": 1e3 * float(np.percentile(seconds, 99)),
            "cold_p50_ms": 1e3 * float(np.percentile(cold, 50))}


def exact_path(items: np.ndarray, queries: np.ndarray, users: np.ndarray, calls: int) -> dict:
    """The package's exact top-K of `users`, its users/s (one batched call) and one user's
    latency."""
    ops = get_backend("cpu")
    V, c = np.ascontiguousarray(items[:, :-1]), np.ascontiguousarray(items[:, -1])
    h = np.ascontiguousarray(queries[:, :-1])

    def top(rows: np.ndarray):
        return top_m(ops, lambda chunk: h[chunk] @ V.T + c, rows, K)
    top(users[:2])                                             # the Numba kernels compiled
    seconds, (idx, _) = timed(lambda: top(users))
    return {"idx": idx, "users_per_s": len(users) / seconds,
            **latency(lambda i: top(users[i % len(users):][:1]), calls)}


def index_path(index: ItemIndex, queries: np.ndarray, users: np.ndarray, truth: np.ndarray,
               calls: int) -> dict:
    """The index's recall@K against `truth`, its users/s and one user's latency."""
    seconds, (idx, _, _) = timed(lambda: index.top(queries[users], users, K, None))
    return {"probes": index.settings.probes, "recall": recall(idx, truth),
            "users_per_s": len(users) / seconds,
            **latency(lambda i: index.top(queries[users[i % len(users)]][None], users[:1], K,
                                          None), calls)}


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    """The share of each row of truth found in the row of `found`, averaged."""
    return float(np.mean([len(np.intersect1d(f, t)) / len(t) for f, t in zip(found, truth)]))


def saved_size(index: ItemIndex) -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.ann"
        index.save(path)
        return path.stat().st_size


def measure_shape(name: str, n_items: int, hidden: int, args) -> dict:
    items, queries = trained_like(n_items, hidden, args.users)
    users = np.arange(args.users, dtype=np.int32)
    exact = exact_path(items, queries, users, args.exact_calls)
    truth = exact.pop("idx")                                           # (users, K)
    print(f"{name}: exact {exact['users_per_s']:.1f} users/s, one user p50 "
          f"{exact['p50_ms']:.2f} ms", flush=True)
    index = ItemIndex(items)
    index.build()
    result = {"shape": name, "items": n_items, "hidden": hidden, "users": args.users,
              "build_s": index.built_seconds, "size_bytes": saved_size(index),
              "lists": index.settings.lists(n_items), "exact": exact, "index": []}
    print(f"{name}: index built in {index.built_seconds:.1f} s, "
          f"{result['size_bytes'] / 2**20:.0f} MiB", flush=True)
    default = index.settings.probes_of(result["lists"])
    for probes in sorted({*args.probes, default}):
        index.settings = IndexSettings(probes=probes, probe_share=0)
        index.prepare_search()
        row = index_path(index, queries, users, truth, args.calls)
        row["default"] = probes == default
        result["index"].append(row)
        print(f"{name}: probes {probes}: recall@{K} {row['recall']:.3f}, "
              f"{row['users_per_s']:.0f} users/s, p50 {row['p50_ms']:.2f} ms", flush=True)
    if args.libraries and name == LIBRARIES_SHAPE:
        result["libraries"] = other_indexes(items, queries, truth)
    return result


def other_indexes(items: np.ndarray, queries: np.ndarray, truth: np.ndarray) -> list[dict]:
    """faiss's and usearch's HNSW graphs (inner product) over the same vectors: build time,
    and recall@K and users/s (all queries in one call) at a few search widths."""
    import faiss
    from usearch.index import Index
    faiss.omp_set_num_threads(CORES)           # as usearch: every core (one-user calls set 1)
    rows = []

    def searched(library: str, build_s: float, set_width, search) -> None:
        for width in (64, 128, 256):
            set_width(width)
            seconds, found = timed(search)
            rows.append({"library": library, "build_s": build_s, "width": width,
                         "recall": recall(found, truth), "users_per_s": len(queries) / seconds})
            print(f"{library}: width {width}: recall@{K} {rows[-1]['recall']:.3f}, "
                  f"{rows[-1]['users_per_s']:.0f} users/s", flush=True)

    graph = faiss.IndexHNSWFlat(items.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    build_s, _ = timed(lambda: graph.add(items))
    searched("faiss HNSW32", build_s, lambda w: setattr(graph.hnsw, "efSearch", w),
             lambda: graph.search(queries, K)[1])
    other = Index(ndim=items.shape[1], metric="ip", dtype="f32", connectivity=32)
    build_s, _ = timed(lambda: other.add(np.arange(len(items)), items))
    searched("usearch HNSW32", build_s, lambda w: setattr(other, "expansion_search", w),
             lambda: other.search(queries, K).keys)
    return rows


def table(result: dict) -> list[str]:
    lines = [f"| shape | items x hidden | path | recall@{K} | users/s | one user p50 ms | "
             "p99 ms | p50 ms, caches cold | x exact users/s |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for shape in result["shapes"]:
        exact, size = shape["exact"], f"{shape['items']:,} x {shape['hidden']}"
        lines.append(f"| {shape['shape']} | {size} | exact | 1 | {exact['users_per_s']:,.1f} | "
                     f"{exact['p50_ms']:.2f} | {exact['p99_ms']:.2f} | "
                     f"{exact['cold_p50_ms']:.2f} | 1 |")
        for row in shape["index"]:
            mark = " (default)" if row["default"] else ""
            lines.append(f"| {shape['shape']} | {size} | index, {row['probes']} of "
                         f"{shape['lists']} lists{mark} | {row['recall']:.3f} | "
                         f"{row['users_per_s']:,.0f} | {row['p50_ms']:.2f} | "
                         f"{row['p99_ms']:.2f} | {row['cold_p50_ms']:.2f} | "
                         f"{row['users_per_s'] / exact['users_per_s']:,.2f} |")
    lines += ["", "| shape | index build s | index size MiB |", "|---|---:|---:|"]
    lines += [f"| {s['shape']} | {s['build_s']:.1f} | {s['size_bytes'] / 2**20:,.0f} |"
              for s in result["shapes"]]
    others = [row for s in result["shapes"] for row in s.get("libraries", [])]
    if others:
        lines += ["", f"| Delicious shape: library | build s | search width | recall@{K} | "
                  "users/s |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {r['library']} | {r['build_s']:.1f} | {r['width']} | {r['recall']:.3f} "
                  f"| {r['users_per_s']:,.0f} |" for r in others]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for ann.json and .md")
    p.add_argument("--users", type=cli.count, default=1024,
                   help="users timed in one call, and whose recall is counted (default: "
                        "%(default)s)")
    p.add_argument("--calls", type=cli.count, default=200,
                   help="one-user calls of the index (default: %(default)s)")
    p.add_argument("--exact-calls", type=cli.count, default=20,
                   help="one-user calls of the exact path (default: %(default)s)")
    p.add_argument("--probes", type=integers(1), default="8,16,32",
                   help="the probes swept, beside the package's own (default: %(default)s)")
    p.add_argument("--shapes", type=names(SHAPES), default=",".join(SHAPES),
                   help="of: " + ", ".join(SHAPES) + " (default: all)")
    p.add_argument("--libraries", action="store_true",
                   help="also faiss's and usearch's HNSW at the Delicious shape")
    add_quick(p, "a small shape in place of --shapes", QUICK)
    args = parse(p, argv, QUICK)
    shapes = QUICK_SHAPES if args.quick else {n: SHAPES[n] for n in args.shapes}
    if args.libraries and LIBRARIES_SHAPE not in shapes:
        p.error("--libraries: the other libraries' indexes are measured at the "
                f"{LIBRARIES_SHAPE} shape" + (", which --quick leaves out" if args.quick
                                              else ": add it to --shapes"))
    faiss = cli.refused(p, faiss_module)
    if args.libraries:                   # said now, not after the shapes' minutes of work
        try:
            import usearch  # noqa: F401
        except ImportError:
            p.error("--libraries needs usearch beside faiss: pip install usearch")
    out_folder(p, args.out)
    with said_when_interrupted(args.out, "ann"):
        result = {**provenance(describe("cpu", device_facts("cpu"))),
                  "versions": {**versions(), "faiss": faiss.__version__},
                  "settings": vars(IndexSettings()),
                  "shapes": [measure_shape(name, *shape, args) for name, shape in shapes.items()]}
        write_results(args.out, "ann", result, "\n".join(
            ["# The approximate index against the exact top-k", "", provenance_line(result), "",
             *table(result)]))
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
