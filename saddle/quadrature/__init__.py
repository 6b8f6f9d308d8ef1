"""Quadrature of Gaussian expectations: the rules (tensor Gauss-Hermite with pruning, scrambled Sobol,
the product with a discrete label law), the independent error check of a training loss, and the
correction of ``E[M*]`` for the kinks along lines of a tensor rule. Imports nothing of the package but
:mod:`~attnphase.saddle.validation` and :mod:`~attnphase.replica.declaration`'s intervals."""
