"""python -m ncae_cuda.experiments: the command is ncae_cuda/commands/experiments.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("experiments")
