"""Column shards: how one model's columns are shared out among the R processes of a sharded fit.

The wall a growing catalogue hits is the columns: E and V are N x K each, and with gradients,
Adam's moments and the best epoch's copy a column costs about 20 KB at K = 500. So rank r of R
holds a contiguous range of columns, [lo, hi): those rows of E, V and c and their state, and
the training matrix's entries in those columns. The hidden layers are replicated (every rank
computes them alike from sums it shares: ncae_cuda/model/distributed.py). Ranges are balanced by
training entries, the work of the sparse layers, since popularity is skewed.

Nothing here communicates: the split, a shard's part of a CSR, and the bookkeeping that keeps
a shard's entries what they are in the whole matrix (their ids, which input dropout hashes, and
their rows' lengths, which the explicit loss weighs by), so that R processes draw the same
masks and losses as one.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp


class Columns(NamedTuple):
    """Columns [lo, hi) of a model's `total`: the share one process holds."""
    lo: int
    hi: int
    total: int

    @property
    def n(self) -> int:
        return self.hi - self.lo

    @property
    def whole(self) -> bool:
        return self.n == self.total

    def owns(self, cols: np.ndarray) -> np.ndarray:
        """(len(cols),) bool: which of the model's columns are this share's."""
        return (cols >= self.lo) & (cols < self.hi)


def split_columns(counts: np.ndarray, world: int) -> np.ndarray:
    """(world+1,) int64 bounds of `world` contiguous column ranges, each of at least one column,
    cut where the running sum of `counts` (the training entries of each column) crosses an
    equal share of the total; ValueError where there are fewer columns than ranges."""
    n = len(counts)
    if world < 1:
        raise ValueError(f"a split needs at least one range; got {world}")
    if n < world:
        raise ValueError(f"{n} columns cannot be shared among {world} processes: each needs at "
                         "least one (use fewer processes)")
    total = np.cumsum(counts, dtype=np.float64)
    share = total[-1] / world if n else 0.0
    # the first column past each rank's equal share, kept at least one column from the last
    # cut and leaving one column for each rank after it
    bounds = np.zeros(world + 1, np.int64)
    bounds[-1] = n
    for r in range(1, world):
        cut = int(np.searchsorted(total, share * r, side="right")) if share > 0 else n * r // world
        bounds[r] = min(max(cut, bounds[r - 1] + 1), n - (world - r))
    return bounds


def column_part(m: sp.csr_matrix, columns: Columns
                ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """A shard's part of the rows x columns CSR m: (its columns, renumbered from 0; each row's
    first entry there as an id of the whole matrix; each row's entries in the whole matrix), the
    last two (rows,) int64, as ops.common.CSR.from_scipy takes them."""
    m = m.tocsr()
    m.sort_indices()
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))              # (nnz,)
    before = np.bincount(rows[m.indices < columns.lo], minlength=m.shape[0])  # (rows,)
    part = m[:, columns.lo:columns.hi].tocsr()
    part.sort_indices()
    return part, m.indptr[:-1] + before, np.diff(m.indptr)
