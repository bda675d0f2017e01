"""python -m ncae_cuda.experiments: the command is ncae_cuda/commands/experiments.py."""
from .cli import exit_with
from .commands.experiments import main

if __name__ == "__main__":
    exit_with(main)
