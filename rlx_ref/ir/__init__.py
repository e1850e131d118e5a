"""The IR: dtypes, shapes, the graph, builder and DSL, verifier and text form."""
