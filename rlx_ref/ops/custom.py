"""Family `custom` (being written)."""
