"""The op registry: one OpDef per RLX op kind, one file per family."""

FAMILIES = (
    "leaves", "elementwise", "linalg", "reduction", "movement", "indexing",
    "normalization", "attention", "conv", "control", "region", "custom", "linalg_decomp",
    "backward_activation", "backward_norm",
    "backward_nn", "backward_conv", "backward_loss", "backward_attention", "backward_scan",
    "quant", "quant_matmul", "fake_quant", "scaled",
    "sort", "random", "splat",
    "conv3d", "backward_conv3d", "attention_axial", "quant_mlx",
    "sequence", "spd", "spd_backward",
    "fused", "region_batch",
    "complex", "spectral",
    "kv_cache", "histogram", "spline", "synth",
)


def load_families():
    """Import every family file; each registers its OpDefs explicitly."""
    import importlib

    for fam in FAMILIES:
        importlib.import_module(f"{__name__}.{fam}")
