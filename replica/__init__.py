"""Declarations of attention models and the symbolic derivation of their replica theory (sympy only)."""
