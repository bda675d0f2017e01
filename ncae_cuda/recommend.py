"""python -m ncae_cuda.recommend: the command is ncae_cuda/commands/recommend.py."""
import sys

from .commands.recommend import main

if __name__ == "__main__":
    sys.exit(main())
