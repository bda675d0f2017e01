"""python -m ncae_cuda.tune: the command is ncae_cuda/commands/tune.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("tune")
