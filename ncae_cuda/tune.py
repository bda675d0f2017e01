"""python -m ncae_cuda.tune: the command is ncae_cuda/commands/tune.py."""
import sys

from .commands.tune import main

if __name__ == "__main__":
    sys.exit(main())
