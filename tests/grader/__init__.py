"""The instructor's tests of the grader (autograder/): the worker, the judge, its sandbox, the
model child, the hidden tests and the grading report. Not in the handout."""
