"""The instructor's tests of hw4lib features the handout gives but does not test in students'
modules: the KV cache, precision, training extras, config reads, the GPU check. Not in the
handout."""
