"""`akg bench`: verify and time solutions side by side with eager and torch.compile baselines."""
