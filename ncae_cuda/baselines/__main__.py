"""python -m ncae_cuda.baselines: the command is ncae_cuda/commands/baselines.py."""
from ..cli import exit_with
from ..commands.baselines import main

if __name__ == "__main__":
    exit_with(main)
