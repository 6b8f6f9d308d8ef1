"""Saddle points as value objects: fixed and constrained points on one base, the checks a point must
pass (an enum of check names with their details, turned into text only in tables), and the diagnosis
that finds the failed ones. Imports only the tuning."""
