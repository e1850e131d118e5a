"""Family `attention` (being written)."""
