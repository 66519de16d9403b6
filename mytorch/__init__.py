"""mytorch: a numpy implementation of the attention stack with hand-written backward passes."""
