"""python -m ncae_cuda.check: the command is ncae_cuda/commands/check.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("check")
