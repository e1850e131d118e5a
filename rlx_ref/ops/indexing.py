"""Family `indexing` (being written)."""
