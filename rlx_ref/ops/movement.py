"""Family `movement` (being written)."""
