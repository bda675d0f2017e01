"""python -m ncae_cuda.baselines: the command is ncae_cuda/commands/baselines.py."""
from ..commands import run_command

if __name__ == "__main__":
    run_command("baselines")
