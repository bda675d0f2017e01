"""python -m ncae_cuda.datasets: the command is ncae_cuda/commands/datasets.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("datasets")
