"""hw4lib: the PyTorch half of hw4p1 (data, model, decoding, training)."""
