"""The grader of hw4p1 (see autograder/README.md), in rooms by trust: ``sandboxed/`` runs beside
student code, ``judging/`` grades one handin (both ship in autograde.tar), ``classroom/`` holds the
staff's class tools and ``build_time/`` what `make autograde` draws; neither of the last two ships.
A room imports only the rooms before it in that order."""
