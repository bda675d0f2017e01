"""python -m ncae_cuda.train: the command is ncae_cuda/commands/train.py."""
from .cli import exit_with
from .commands.train import main

if __name__ == "__main__":
    exit_with(main)
