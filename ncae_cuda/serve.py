"""python -m ncae_cuda.serve: the command is ncae_cuda/commands/serve.py."""
import sys

from .commands.serve import main

if __name__ == "__main__":
    sys.exit(main())
