"""The alpha grid as a whole: every branch traced (a survey), the global minimum and its changes, and
the thresholds alpha_c and alpha_l by Brent's method on fresh solves. Imports every other room."""
