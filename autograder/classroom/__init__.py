"""The staff's tools for a whole class, run in the instructors' repository and never shipped:
the bulk regrade, rescoring, the gradebook, similarity and the bulk downloads' layouts."""
