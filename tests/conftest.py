import os

os.environ.setdefault("RLX_REF_VERIFY", "1")
# tests never benchmark a backend to pick a device: calibration tests inject their numbers
os.environ.setdefault("RLX_REF_CALIBRATION", "off")
