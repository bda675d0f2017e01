"""python -m ncae_cuda.train: the command is ncae_cuda/commands/train.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("train")
