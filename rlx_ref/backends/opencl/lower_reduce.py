"""OpenCL lowerings of this family (kinds not yet registered here take the host path)."""
