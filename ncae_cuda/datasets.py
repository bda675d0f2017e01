"""python -m ncae_cuda.datasets: the command is ncae_cuda/commands/datasets.py."""
from .cli import exit_with
from .commands.datasets import main

if __name__ == "__main__":
    exit_with(main)
