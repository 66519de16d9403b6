"""What `make autograde` draws at build time and nothing ships: the hidden test set's seed."""
