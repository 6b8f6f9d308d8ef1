"""Studies on top of the theory: scans, finite-d simulations, figures, files and the command line."""
