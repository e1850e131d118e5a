import os

os.environ.setdefault("RLX_REF_VERIFY", "1")
