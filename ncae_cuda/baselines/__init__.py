"""The baselines NCAE is compared with: EASE, iALS, BPR, POP, item-kNN and RP3beta (models,
neighbours), each chosen on validation by a grid, and each a model of the package's contract
(estimators). `python -m ncae_cuda.baselines` (ncae_cuda/commands/baselines.py) runs them.
"""
