"""python -m ncae_cuda.experiments: the command is ncae_cuda/commands/experiments.py."""
import sys

from .commands.experiments import main

if __name__ == "__main__":
    sys.exit(main())
