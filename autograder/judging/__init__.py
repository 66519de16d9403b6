"""Grading one handin, trusted, in three rooms by the step they serve, bottom to top: ``intake/``
(the handin extracted and read, never run), ``isolation/`` (the sandbox, the processes and their
limits), ``scoring/`` (the hidden tests, the language model, the points, the report and the
feedback). A room imports only the rooms below it. On top, the entry points that run the rooms:
the judge's driver (``grade``, ``command_line``) and the platforms' adapters that run it
(``grading_run``, ``gradescope``: Autolab's Makefile, Gradescope's run_autograder). Ships in
autograde.tar with autograder/sandboxed/."""
