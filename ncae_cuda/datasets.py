"""python -m ncae_cuda.datasets: the command is ncae_cuda/commands/datasets.py."""
import sys

from .commands.datasets import main

if __name__ == "__main__":
    sys.exit(main())
