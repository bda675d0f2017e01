"""The Python API on the GPU backends (the kernels emulated on the CPU, and a real GPU where
there is one) agrees with the CPU backend, and models move between them through save/load."""
import numpy as np
import pytest
import scipy.sparse as sp

from ncae_cuda import NCAE


def interactions(n_users: int, n_items: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    X = sp.random(n_users, n_items, density=density, format="csr", random_state=rng)
    X.data[:] = rng.integers(1, 6, X.nnz)
    return X


def assert_same_ranking(a, b):
    """Equal ids where the scores leave no near-tie, and scores equal to float32 rounding."""
    (ids_a, scores_a), (ids_b, scores_b) = a, b
    np.testing.assert_allclose(scores_a, scores_b, rtol=1e-4, atol=1e-5)
    with np.errstate(invalid="ignore"):                 # -inf - -inf in the padding
        gap = np.abs(np.diff(scores_a, axis=1))
    clear = np.ones_like(scores_a, bool)
    clear[:, 1:] &= gap > 1e-4
    clear[:, :-1] &= gap > 1e-4
    np.testing.assert_array_equal(ids_a[clear], ids_b[clear])


@pytest.mark.parametrize("settings", [dict(feedback="implicit", based="user"),
                                      dict(feedback="explicit", based="item")])
def test_a_cpu_model_loads_on_the_gpu_and_back(tmp_path, gpu, settings):
    X = interactions(40, 30, 0.2, seed=0)
    cpu = NCAE(device="cpu", hidden=(8, 6), batch_size=16, **settings).fit(X, epochs=2,
                                                                           verbose=False)
    cpu.save(tmp_path / "cpu.npz")
    on_gpu = NCAE.load(tmp_path / "cpu.npz", device=gpu)
    assert on_gpu.ops.name == "gpu"
    users, items = np.arange(40), np.arange(30)
    assert_same_ranking(cpu.recommend(users, n=7), on_gpu.recommend(users, n=7))
    assert_same_ranking(cpu.similar_items(items, n=4), on_gpu.similar_items(items, n=4))
    np.testing.assert_allclose(on_gpu.predict(users[:10], items[:10]),
                               cpu.predict(users[:10], items[:10]), rtol=1e-5)
    on_gpu.save(tmp_path / "gpu.npz")
    back = NCAE.load(tmp_path / "gpu.npz", device="cpu")
    np.testing.assert_array_equal(back.recommend(users, n=7)[0], cpu.recommend(users, n=7)[0])


def test_fold_in_and_more_items_than_the_topk_kernel_keeps(gpu):
    X = interactions(12, 1100, 0.02, seed=1)
    model = NCAE(device=gpu, feedback="implicit", hidden=(4,), batch_size=8)
    model.fit(X, epochs=1, verbose=False)
    cpu = NCAE(device="cpu", feedback="implicit", hidden=(4,), batch_size=8)
    cpu.fit(X, epochs=1, verbose=False)
    np.testing.assert_allclose(model.ops.to_host(model._net.params), cpu._net.params,
                               rtol=1e-4, atol=1e-6)
    users = np.arange(12)
    n = 1100                                  # beyond the kernel's 1024: ranked on the host
    assert_same_ranking(model.recommend(users, n=n), cpu.recommend(users, n=n))
    assert_same_ranking(model.recommend_new(X[:5], n=20), model.recommend(users[:5], n=20))


@pytest.mark.parametrize("settings", [dict(feedback="implicit", based="user", hidden=(8,)),
                                      dict(feedback="explicit", based="item", hidden=(8, 6))])
def test_a_step_replayed_from_a_captured_graph_trains_bit_identically(gpu, settings):
    # A captured step is replayed with its launches sized for the largest batch and every
    # per-step value read from device memory: the same kernels, the same sums, the same bits.
    X = interactions(50, 30, 0.2, seed=2)
    models = []
    for graphs in (False, True):
        ops_ = type(gpu)(gpu.device)                   # its own settings, the same device
        ops_.graphs = graphs
        models.append(NCAE(device=ops_, batch_size=16, **settings).fit(X, epochs=3,
                                                                       verbose=False))
    eager, replayed = models
    assert replayed._net.memory.graph is not None and eager._net.memory.graph is None
    assert [h["loss"] for h in eager.history] == [h["loss"] for h in replayed.history]
    np.testing.assert_array_equal(eager.ops.to_host(eager._net.params),
                                  replayed.ops.to_host(replayed._net.params))
