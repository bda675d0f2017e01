"""python -m ncae_cuda.check: the command is ncae_cuda/commands/check.py."""
import sys

from .commands.check import main

if __name__ == "__main__":
    sys.exit(main())
