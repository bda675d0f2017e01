"""The baselines NCAE is compared with: EASE, iALS, BPR and POP (models), each chosen on
validation by a grid. `python -m ncae_cuda.baselines` (ncae_cuda/commands/baselines.py) runs them.
"""
