"""A plain I-AutoRec (Sedhain et al., WWW 2015) on ncae_cuda's own data, split and metric code,
beside NCAE trained from a recipe on the same split in the same command.

    python -m bench.autorec_peer --dataset ml-100k --data-dir ../shared/data --split u1 \\
        --config recipes/ml-100k-explicit.toml --seeds 0,1,2 --out runs/autorec
    python -m bench.autorec_peer --dataset ml-100k --split u1 --lambdas 10,30,100   # peer only

Item-based: item i's row r_i (its ratings by every user, 0 where unobserved) is encoded as
h = sigmoid(V r_i + mu) (K), decoded as out = W h + b (users), and the loss counts observed
entries only:  sum_i ||(r_i - out_i) * observed_i||^2 + lambda/2 (||W||^2 + ||V||^2).
Trained full batch by scipy's L-BFGS-B with the analytic gradient in float64. The prediction
of rating (u, i) is out_i[u] clipped to the rating scale.

The split is the trainer's own (ncae_cuda.runs.protocol.make_split with the same --split,
--valid-ratio and --split-seed), so validation and test are the entries `python -m
ncae_cuda.train` scores. lambda and the number of L-BFGS iterations are chosen on validation
(scored every --every iterations); then the model is retrained on training + validation with
them and scored once on every test entry, those a split holds apart as cold too (predicted,
as NCAE predicts them, from the fit data's means), as a data set's published figures are
(--no-refit: the chosen validation model is scored instead). With --config, NCAE runs
the trainer's same protocol on the same split, once per seed, and autorec_peer.md tabulates
both (written again after each seed), under the commit, the date and the machine.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from bench.cli import integers, numbers, out_folder, said_when_interrupted, write_results
from bench.epoch_time import machine, provenance, provenance_line
from ncae_cuda import cli
from ncae_cuda.commands.flags import run_flags
from ncae_cuda.data import datasets
from ncae_cuda.data.interactions import Interactions
from ncae_cuda.errors import NcaeError, RecipeError
from ncae_cuda.model import metrics
from ncae_cuda.model.cold_means import cold_at, cold_ratings, shrunk_means
from ncae_cuda.model.config import read_recipe
from ncae_cuda.runs import protocol
from ncae_cuda.runs.spec import DataSpec


def shapes(n_cols: int, k: int) -> dict:
    """Parameter shapes, in their order in the flat vector."""
    return {"V": (k, n_cols), "mu": (k,), "W": (n_cols, k), "b": (n_cols,)}


def unpack(theta: np.ndarray, n_cols: int, k: int) -> dict:
    out, start = {}, 0
    for name, shape in shapes(n_cols, k).items():
        size = int(np.prod(shape))
        out[name] = theta[start:start + size].reshape(shape)
        start += size
    return out


def init(n_cols: int, k: int, seed: int) -> np.ndarray:
    """Xavier-uniform V, W; zero biases."""
    rng = np.random.default_rng(seed)
    bound = np.sqrt(6.0 / (n_cols + k))
    return np.concatenate([rng.uniform(-bound, bound, k * n_cols), np.zeros(k),
                           rng.uniform(-bound, bound, n_cols * k), np.zeros(n_cols)])


def encode(p: dict, X: sp.csr_matrix) -> np.ndarray:
    """h (rows, K) = sigmoid(X V^T + mu)."""
    return 1.0 / (1.0 + np.exp(-(X @ p["V"].T + p["mu"])))


def loss_and_grad(theta: np.ndarray, X: sp.csr_matrix, k: int, lam: float):
    """(objective, gradient) of I-AutoRec on the rows x cols matrix X (observed = stored)."""
    n_cols = X.shape[1]
    p = unpack(theta, n_cols, k)
    h = encode(p, X)                                                # (rows, K)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))      # (nnz,)
    out = (h @ p["W"].T)[rows, X.indices] + p["b"][X.indices]      # (nnz,) dense BLAS, gathered
    err = out - X.data                                              # (nnz,)
    loss = err @ err + 0.5 * lam * (np.vdot(p["W"], p["W"]) + np.vdot(p["V"], p["V"]))
    dout = sp.csr_matrix((2.0 * err, X.indices, X.indptr), shape=X.shape)
    g = {"W": dout.T @ h + lam * p["W"], "b": np.asarray(dout.sum(axis=0)).ravel()}
    dz = (dout @ p["W"]) * h * (1.0 - h)                            # (rows, K)
    g["V"] = (X.T @ dz).T + lam * p["V"]
    g["mu"] = dz.sum(axis=0)
    return float(loss), np.concatenate([np.ravel(g[name]) for name in shapes(n_cols, k)])


def fit(X: sp.csr_matrix, k: int, lam: float, maxiter: int, seed: int = 0,
        check=None, every: int = 0) -> np.ndarray:
    """L-BFGS-B from a seeded Xavier init for at most maxiter iterations; check(iteration,
    theta) is called every `every` iterations (validation curves)."""
    X = X.astype(np.float64)
    count = [0]

    def callback(theta):
        count[0] += 1
        if check is not None and every and count[0] % every == 0:
            check(count[0], theta)
    result = scipy.optimize.minimize(loss_and_grad, init(X.shape[1], k, seed), args=(X, k, lam),
                                     jac=True, method="L-BFGS-B", callback=callback,
                                     options={"maxiter": maxiter, "maxfun": 2 * maxiter})
    if check is not None and every and count[0] % every:
        check(count[0], result.x)
    return result.x


def predict(theta: np.ndarray, X: sp.csr_matrix, k: int, rows: np.ndarray, cols: np.ndarray,
            scale: tuple[float, float]) -> np.ndarray:
    """Clipped predictions at (rows[i], cols[i]), each row encoded from its row of X."""
    p = unpack(theta, X.shape[1], k)
    h = encode(p, X.astype(np.float64))
    return np.clip((h @ p["W"].T)[rows, cols] + p["b"][cols], *scale)


def rmse_on(theta, X: sp.csr_matrix, k: int, held: Interactions, scale) -> float:
    """RMSE at held-out entries (item-based: rows are items, columns users); an entry whose
    user or item has no rating in X is predicted from X's shrunk means, as NCAE predicts it
    (ncae_cuda/model/cold_means.py), not from weights that never saw it."""
    pred = predict(theta, X, k, held.items, held.users, scale)
    seen = X.T.tocsr()                                              # users x items
    user_counts = np.diff(seen.indptr)
    cold = cold_at(user_counts, np.bincount(seen.indices, minlength=seen.shape[1]), held.users,
                   held.items)
    pred[cold] = cold_ratings(shrunk_means(seen), user_counts, held.users[cold],
                              held.items[cold])
    return metrics.rmse(pred, held.ratings)


def every_test_entry(split) -> Interactions:
    """The test part with its cold entries (those a split holds apart: ML-100K's u1 has 32 of
    20,000), every entry a data set's published figures score."""
    cold = split.cold_test
    return split.test if cold is None or not cold.nnz else split.test.concat(cold)


def select_and_test(split, scale, k: int, lambdas: list[float], maxiter: int, every: int,
                    seed: int, refit: bool) -> dict:
    """lambda and the iteration count chosen on split.valid, then (refit) retrained on training +
    validation with them; the test RMSE of the result, and every validation score."""
    X = split.train.to_csr("item").astype(np.float64)
    runs, best, best_theta = [], None, None
    for lam in lambdas:
        start = time.perf_counter()

        def check(iteration, theta, lam=lam):
            nonlocal best, best_theta
            run = {"lambda": lam, "iterations": iteration,
                   "valid_rmse": rmse_on(theta, X, k, split.valid, scale),
                   "seconds": time.perf_counter() - start}
            runs.append(run)
            print(f"  lambda {lam:g}, {iteration} iterations: valid rmse "
                  f"{run['valid_rmse']:.4f} | {run['seconds']:.1f} s", flush=True)
            if best is None or run["valid_rmse"] < best["valid_rmse"]:
                best, best_theta = run, theta.copy()
        fit(X, k, lam, maxiter, seed, check, every or maxiter)
    if refit:
        X = split.fold_validation().train.to_csr("item").astype(np.float64)
        best_theta = fit(X, k, best["lambda"], best["iterations"], seed)
    test = every_test_entry(split)
    return {"runs": runs, "best": best, "test_rmse": rmse_on(best_theta, X, k, test, scale),
            "test_entries": test.nnz}


def ncae_run(args, seed: int) -> dict:
    """NCAE on the same data and split: python -m ncae_cuda.train with the recipe (its log and
    metrics.json under --out); its validation and test RMSE and seconds per epoch."""
    out = args.out / f"ncae-seed{seed}"
    argv = ["--config", str(args.config), "--dataset", args.dataset, "--split", args.split,
            "--test-ratio", str(args.test_ratio), "--valid-ratio", str(args.valid_ratio),
            "--split-seed", str(args.split_seed), "--seed", str(seed), "--out", str(out),
            "--overwrite", *(["--data-dir", str(args.data_dir)] if args.data_dir else []),
            *(["--no-refit"] if not args.refit else [])]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "log.txt", "w") as log, contextlib.redirect_stdout(log):
        result = run_flags(argv)
    valid = [r["valid"]["rmse"] for r in result["history"] if "valid" in r]
    test = result.get("all_test", result["test"])       # every test entry, as the peer's
    return {"valid_rmse": min(valid) if valid else None, "test_rmse": test["rmse"],
            "test_entries": test["entries"],
            "best_epoch": result["best_epoch"], "seconds_per_epoch": result["seconds_per_epoch"]}


def table(peer: list[dict], ncae: list[dict], seeds: list[int]) -> str:
    """Markdown: validation and test RMSE per seed, and the mean test RMSE, of both models."""
    def row(name, results):
        valid = " / ".join(f"{r['valid_rmse']:.4f}" for r in results)
        test = " / ".join(f"{r['test_rmse']:.4f}" for r in results)
        mean = np.mean([r["test_rmse"] for r in results])
        return f"| {name} | {valid} | {test} | {mean:.4f} |"
    seeds_shown = " / ".join(map(str, seeds))
    lines = [f"| model | valid RMSE (seeds {seeds_shown}) | test RMSE (seeds {seeds_shown}) | "
             "mean test RMSE |", "|---|---|---|---:|"]
    if ncae:
        lines.append(row("NCAE", ncae))
    lines.append(row("I-AutoRec", [{"valid_rmse": p["best"]["valid_rmse"], **p} for p in peer]))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = cli.Parser(prog="python -m bench.autorec_peer", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, metavar="RECIPE",
                   help="also train NCAE with this recipe on the same split and seeds, in this "
                        "command (e.g. recipes/ml-100k-explicit.toml)")
    p.add_argument("--dataset", default="ml-100k",
                   help="a data set with ratings, by name or file, as train's (default: "
                        "%(default)s)")
    p.add_argument("--data-dir", type=Path,
                   help="where the data set is kept, as train's --data-dir")
    p.add_argument("--split", default="u1", help="as ncae_cuda.train: u1..ub or random "
                                                 "(default: %(default)s)")
    p.add_argument("--test-ratio", type=float, default=0.1,
                   help="random split (default: %(default)g)")
    p.add_argument("--valid-ratio", type=float, default=0.1,
                   help="validation share, as ncae_cuda.train (default: %(default)g)")
    p.add_argument("--split-seed", type=int, default=0, help="(default: %(default)s)")
    p.add_argument("--hidden", type=cli.count, default=500,
                   help="K (default: %(default)s, the paper's)")
    p.add_argument("--lambdas", type=numbers(float, 0), default="100,200,300,400,500",
                   help="L2 strengths, chosen on validation (default: %(default)s; a wider "
                        "screen, 1..300, chose 200-300 on u1)")
    p.add_argument("--maxiter", type=cli.count, default=300, help="most L-BFGS iterations "
                                                            "(default: %(default)s)")
    p.add_argument("--every", type=int, default=25,
                   help="score validation every this many iterations: the iteration count is "
                        "chosen on validation with lambda (0: maxiter only; default: %(default)s)")
    p.add_argument("--seeds", type=integers(0), default="0",
                   help="initialization seeds, e.g. 0,1,2 (default: %(default)s)")
    p.add_argument("--no-refit", dest="refit", action="store_false",
                   help="score test with the chosen validation model instead of retraining "
                        "on training + validation")
    p.add_argument("--out", type=Path, default=Path("runs/autorec-peer"),
                   help="autorec_peer.md, autorec_peer.json and NCAE's runs (default: "
                        "runs/autorec-peer)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    seeds, lambdas = args.seeds, args.lambdas
    if args.every < 0:
        parser.error(f"--every must be >= 0; got {args.every}")
    if args.config:
        # NCAE trains after each seed's I-AutoRec: a recipe it cannot read is said before any
        try:
            read_recipe(args.config)
        except RecipeError as e:
            parser.error(f"--config {e}")
    try:
        data = datasets.load(args.dataset, data_dir=args.data_dir)
        if data.ratings is None:
            parser.error(f"--dataset {args.dataset} has no ratings: I-AutoRec is for explicit "
                         "feedback")
        split = protocol.make_split(DataSpec(dataset=args.dataset, data_dir=args.data_dir,
                                             split=args.split, test_ratio=args.test_ratio,
                                             valid_ratio=args.valid_ratio,
                                             split_seed=args.split_seed), data, "item")
    except NcaeError as e:                      # no such data set, or no such split of it
        print(f"error: {e}", file=sys.stderr)
        return 2
    out_folder(parser, args.out)                # once the flags and the data are sound
    with said_when_interrupted(args.out, "autorec_peer"):
        scale = data.rating_scale or (float(data.ratings.min()), float(data.ratings.max()))
        print(f"{data.name}: train {split.train.nnz}, valid {split.valid.nnz}, test "
              f"{split.test.nnz}; I-AutoRec K={args.hidden}, L-BFGS-B, lambdas "
              f"{','.join(f'{v:g}' for v in lambdas)}, "
              f"at most {args.maxiter} iterations")
        command = ("python -m bench.autorec_peer "
                   + " ".join(argv if argv is not None else sys.argv[1:]))
        config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        where = provenance(machine())
        peer, ncae = [], []
        for seed in seeds:
            start = time.perf_counter()
            peer.append(select_and_test(split, scale, args.hidden, lambdas, args.maxiter,
                                        args.every, seed, args.refit))
            best = peer[-1]["best"]
            print(f"I-AutoRec seed {seed}: lambda {best['lambda']:g}, {best['iterations']} "
                  f"iterations: valid {best['valid_rmse']:.4f}, test {peer[-1]['test_rmse']:.4f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
            if args.config:
                ncae.append(ncae_run(args, seed))
                print(f"NCAE seed {seed}: best epoch {ncae[-1]['best_epoch']}: valid "
                      f"{ncae[-1]['valid_rmse']:.4f}, test {ncae[-1]['test_rmse']:.4f}", flush=True)
            text = table(peer, ncae, seeds[:len(peer)])                  # written after each seed
            write_results(args.out, "autorec_peer", {**where, "config": config, "peer": peer,
                                                     "ncae": ncae},
                          f"# {data.name}, split {args.split}: "
                          f"{'NCAE and I-AutoRec' if args.config else 'I-AutoRec'}\n\n"
                          f"{provenance_line(where)}\n\n{command}\n\n{text}",
                          (len(peer), len(seeds), "seeds run"))
        print(f"\n{text}\n\nwrote {args.out / 'autorec_peer.md'}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
