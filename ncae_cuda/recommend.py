"""python -m ncae_cuda.recommend: the command is ncae_cuda/commands/recommend.py."""
from .cli import exit_with
from .commands.recommend import main

if __name__ == "__main__":
    exit_with(main)
