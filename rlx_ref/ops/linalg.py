"""Family `linalg` (being written)."""
