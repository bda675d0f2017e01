"""A saved model served over HTTP (python -m ncae_cuda.serve, the [serve] extra): the model a
SIGHUP swaps (holder.py), requests gathered onto one scoring call (batcher.py), and the
endpoints (app.py)."""
