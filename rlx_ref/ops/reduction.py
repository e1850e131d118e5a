"""Family `reduction` (being written)."""
