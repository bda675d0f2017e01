"""python -m ncae_cuda.check: the command is ncae_cuda/commands/check.py."""
from .cli import exit_with
from .commands.check import main

if __name__ == "__main__":
    exit_with(main)
