"""Sparsity-aware augmentation on hand-made matrices, the popularity weights, and the variants."""
import json

import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda.commands import train
from ncae_cuda.commands.flags import build_parser, run_spec
from ncae_cuda.model.augment import popularity_weights, sparse_row_copies, uniform_weights

# column popularity (entries per column): 0:3, 1:2, 2:2, 3:1, 4:1, 5:0
MATRIX = sp.csr_matrix(np.array([[1, 1, 1, 1, 0, 0],
                                 [1, 0, 1, 0, 1, 0],
                                 [1, 1, 0, 0, 0, 0],
                                 [0, 0, 0, 0, 0, 0]], np.float32))


def test_sparse_rows_lose_their_most_popular_items():
    # |R|/N < 0.7 holds for rows 0 (4/6), 1 (3/6), 2 (2/6); row 3 is empty. p = 0.5 drops
    # floor(|R|/2): row 0 loses 0 and 1 (1 ties 2: the lower index goes), row 1 loses 0, row 2
    # loses 0.
    extra = sparse_row_copies(MATRIX, eps=0.7, p=0.5)
    np.testing.assert_array_equal(extra.toarray(), [[0, 0, 1, 1, 0, 0],
                                                    [0, 0, 1, 0, 1, 0],
                                                    [0, 1, 0, 0, 0, 0]])


def test_eps_selects_the_sparse_rows():
    # eps * N = 3.6: only rows with fewer than 3.6 entries (rows 1 and 2)
    extra = sparse_row_copies(MATRIX, eps=0.6, p=0.5)
    np.testing.assert_array_equal(extra.toarray(), [[0, 0, 1, 0, 1, 0], [0, 1, 0, 0, 0, 0]])
    # eps * N = 3 exactly: |R|/N < eps is strict, so row 1 (3 entries) is not sparse
    extra = sparse_row_copies(MATRIX, eps=0.5, p=0.5)
    np.testing.assert_array_equal(extra.toarray(), [[0, 1, 0, 0, 0, 0]])


@pytest.mark.parametrize("eps, p", [(0.0, 0.8), (0.9, 1.0), (0.9, 0.2)])
def test_no_copy_when_nothing_or_everything_would_be_dropped(eps, p):
    # eps 0: no row is sparse; p 1: a copy would be empty; p 0.2: floor(0.2 |R|) = 0 drops
    assert sparse_row_copies(MATRIX, eps, p).shape == (0, 6)


def test_copies_keep_values_and_column_order():
    m = sp.csr_matrix(np.array([[0, 5, 0, 2, 3], [4, 4, 0, 0, 0]], np.float32))
    extra = sparse_row_copies(m, eps=1.0, p=0.4)   # row 0 drops col 1 (the popular one)
    np.testing.assert_array_equal(extra.toarray(), [[0, 0, 0, 2, 3]])


def test_popularity_weights_follow_the_formula():
    counts = np.array([9, 1, 0, 6])
    share = counts / counts.sum()
    expect = 512 * share ** 0.5 / (share ** 0.5).sum()
    np.testing.assert_allclose(popularity_weights(counts, 512, 0.5), expect, rtol=1e-6)
    # by hand, at an omega other than 1/2 (where f^omega and f^(1-omega) agree): counts 1, 0,
    # 8, 0 at omega 1/3 are c0 * (1, 0, 2, 0) / 3
    np.testing.assert_allclose(popularity_weights(np.array([1, 0, 8, 0]), 6.0, 1 / 3),
                               [2.0, 0.0, 4.0, 0.0], rtol=1e-6)
    np.testing.assert_array_equal(uniform_weights(3, 0.05), np.float32([0.05] * 3))


TINY = ["--dataset", "synthetic-tiny", "--hidden", "8", "--batch-size", "16", "--device", "cpu",
        "--feedback", "implicit", "--epochs", "2"]


def test_augmented_rows_train_but_are_not_evaluated(tmp_path, capsys):
    # synthetic-tiny: 50 items, every user has >= 3: eps 0.2 makes rows with < 10 items sparse
    assert train.main([*TINY, "--augment-eps", "0.2", "--out", str(tmp_path)]) == 0
    log = capsys.readouterr().out
    extra = int(log.split("augmentation: ")[1].split()[0])
    assert extra > 0 and "NCAE+" in log
    result = json.loads((tmp_path / "metrics.json").read_text())
    assert result["test"]["rows"] == result["data"]["users"]     # one test row per real user


@pytest.mark.parametrize("flags, weighting, eps", [
    ([], "popularity", 0.001), (["--variant", "NCAE+"], "popularity", 0.001),
    (["--variant", "NCAE"], "popularity", 0.0), (["--variant", "NCAE-"], "uniform", 0.0),
    (["--weighting", "uniform"], "uniform", 0.001), (["--augment-eps", "0"], "popularity", 0.0),
])
def test_variants_set_weighting_and_augmentation(flags, weighting, eps):
    _, config = run_spec(build_parser(), [*TINY, *flags])
    assert (config.weighting, config.augment_eps) == (weighting, eps)


@pytest.mark.parametrize("flags, message", [
    (["--variant", "NCAE-", "--weighting", "popularity"],
     "--variant: NCAE- uses weighting uniform"),
    (["--variant", "NCAE", "--augment-eps", "0.01"], "has no augmentation"),
    (["--feedback", "explicit", "--augment-eps", "0.01"], "is for implicit feedback"),
])
def test_conflicting_variant_flags_are_refused(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit):
        train.main([*TINY, "--out", str(tmp_path), *flags])
    assert message in capsys.readouterr().err
