"""python -m ncae_cuda.baselines: the command is ncae_cuda/commands/baselines.py."""
import sys

from ..commands.baselines import main

if __name__ == "__main__":
    sys.exit(main())
