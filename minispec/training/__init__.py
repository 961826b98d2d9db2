"""The model shop: the corpus, the character tokenizer and the training script
that rebuild the shipped checkpoints (``python -m minispec.training.train``).
Nothing at serving time imports it."""
