"""Scale-free training: a data set and the same data mapped affinely to 1-100 (or 0.5-5) train,
with one recipe and seed, to the same RMSE relative to the range, on any backend. The network
reads and predicts ratings on one scale (network.NETWORK_SCALE); before, a 1-100 scale's inputs
saturated the first layer and trained ~5% worse relative to its range."""
import dataclasses

import numpy as np
import pytest

from ncae_cuda import NCAE, ops
from ncae_cuda.data import datasets, splits

SCALES = [(1.0, 5.0), (1.0, 100.0), (0.5, 5.0)]
# The map is the host's (FitData and the Objective), whatever backend trains: a real GPU beside
# the CPU, not the emulated one (minutes here for what the op tests check of its kernels).
DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.skipif(not ops.HAS_CUDA,
                                                               reason=ops.NO_CUDA_REASON))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("output", ["tanh", "identity"])
def test_one_recipe_trains_every_scale_to_the_same_relative_rmse(device, output):
    data = datasets.load("synthetic-tiny")
    relative, predicted = [], []
    for low, high in SCALES:
        ratings = low + (data.ratings.astype(np.float64) - 1.0) * (high - low) / 4
        scaled = dataclasses.replace(data, ratings=ratings.astype(np.float32),
                                     rating_scale=(low, high))
        split = splits.random_split(scaled, 0.2, 0.1, seed=0)
        model = NCAE(hidden=(16,), output=output, epochs=8, seed=0, device=device).fit(
            split.train, validation=split.valid, verbose=False)
        test = split.test
        relative.append(model.evaluate(test)["rmse"] / (high - low))
        yhat = model.predict(test.user_ids[test.users], test.item_ids[test.items])
        predicted.append((yhat - low) / (high - low))
    assert 0.05 < relative[0] < 0.5                              # it learned, and not vacuously
    np.testing.assert_allclose(relative, relative[0], rtol=1e-5)
    for p in predicted[1:]:                                      # the same model, scale aside
        np.testing.assert_allclose(p, predicted[0], atol=1e-5)
