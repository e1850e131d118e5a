"""Family `control` (being written)."""
