"""Backends: the contract (base), name lookup (registry) and the built-in backends."""
