"""Small reference models built with the graph builder (end-to-end checks and demos)."""
