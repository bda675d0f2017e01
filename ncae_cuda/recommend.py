"""python -m ncae_cuda.recommend: the command is ncae_cuda/commands/recommend.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("recommend")
