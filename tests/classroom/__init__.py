"""The instructor's tests of the class tools (autograder/classroom/: regrade, rescore, gradebook,
similarity, the per-handin guard). Not in the handout."""
