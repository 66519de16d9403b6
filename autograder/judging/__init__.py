"""Grading one handin, trusted: extraction, the sandbox, the hidden tests, the model child, the
report, and the platforms' adapters that run it (Autolab's Makefile, Gradescope's run_autograder).
Ships in autograde.tar with autograder/sandboxed/."""
