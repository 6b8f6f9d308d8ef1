"""The linear positional baseline (THEORY.md sec. 7), a peer of the saddle-point solver."""
