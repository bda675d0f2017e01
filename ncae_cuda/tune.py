"""python -m ncae_cuda.tune: the command is ncae_cuda/commands/tune.py."""
from .cli import exit_with
from .commands.tune import main

if __name__ == "__main__":
    exit_with(main)
