"""mytorch: the attention stack, and (the bonus track) the whole language model and AdamW, in numpy
with hand-written backward passes."""
