"""Family `region` (being written)."""
