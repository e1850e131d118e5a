"""Family `conv` (being written)."""
