"""The commands, each a thin parser over ncae_cuda.runs: `python -m ncae_cuda.NAME` runs
ncae_cuda/commands/NAME.py (train, tune, baselines, experiments, recommend, check, datasets).
"""
