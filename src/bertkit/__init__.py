"""bertkit: BERT from scratch on PyTorch."""
