"""python -m ncae_cuda.train: the command is ncae_cuda/commands/train.py."""
import sys

from .commands.train import main

if __name__ == "__main__":
    sys.exit(main())
