"""``python -m attnphase``: the command line (:mod:`attnphase.experiments.cli`)."""

from attnphase.experiments.cli import main

main()
