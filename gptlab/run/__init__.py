"""One run: its config, its data, the training loop and the run directory it lives in."""
