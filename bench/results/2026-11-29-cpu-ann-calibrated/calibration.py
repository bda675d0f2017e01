"""Each model's index built as by default, its log line saying the probes the calibration chose
and the recall@10 they found on its sample of users.

    python calibration.py MODEL.npz [...]
"""
import logging
import sys

from ncae_cuda import load_model
from ncae_cuda.model.ann import ItemIndex

logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stdout)
logging.getLogger("faiss").setLevel(logging.WARNING)
for path in sys.argv[1:]:
    print(path, flush=True)
    ItemIndex.for_model(load_model(path, device="cpu"))        # built, not saved: calibrated
