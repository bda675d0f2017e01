"""NCAE (Neural Collaborative Autoencoder) recommender: CUDA kernels and a Numba CPU backend."""
__version__ = "0.1.0"
