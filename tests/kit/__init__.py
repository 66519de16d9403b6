"""The instructor's tests of the course kit: the handout and its tests, the data builder, the
notebook, the docs, the grading numbers' single source and the repository's layout and import
layers. Not in the handout."""
