"""The Autolab autograder of hw4p1: grades a student's handin.tar (see autograder/README.md)."""
