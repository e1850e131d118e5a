"""Family `normalization` (being written)."""
