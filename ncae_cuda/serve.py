"""python -m ncae_cuda.serve: the command is ncae_cuda/commands/serve.py."""
from .commands import run_command

if __name__ == "__main__":
    run_command("serve")
