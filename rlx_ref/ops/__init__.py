"""The op registry: one OpDef per RLX op kind, one file per family."""

FAMILIES = (
    "leaves", "elementwise", "linalg", "reduction", "movement", "indexing",
    "normalization", "attention", "conv", "control", "region", "custom",
    "backward_activation", "backward_norm",
    "backward_nn", "backward_conv", "backward_loss", "backward_attention", "backward_scan",
    "quant", "quant_matmul", "fake_quant", "scaled",
    "complex", "spectral",
)


def load_families():
    """Import every family file; each registers its OpDefs explicitly."""
    import importlib

    for fam in FAMILIES:
        importlib.import_module(f"{__name__}.{fam}")
