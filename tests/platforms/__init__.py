"""The instructor's tests of the grader in emulated Gradescope, Autolab and laptop profiles
(``make test-platforms``, tools/platform_profiles.py). Not in the handout."""
