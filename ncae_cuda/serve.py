"""python -m ncae_cuda.serve: the command is ncae_cuda/commands/serve.py."""
from .cli import exit_with
from .commands.serve import main

if __name__ == "__main__":
    exit_with(main)
