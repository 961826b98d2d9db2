"""The model shop: the character tokenizer and the training scripts that rebuild the shipped
checkpoints (``python -m training.train``, ``python -m training.eagle``; ``make train``).

It lives beside the package, as ``reference/`` does: a learner loads the checkpoints and never
trains them, and training needs transformers (the ``lab`` extra). The corpus split the notebooks
and tests use stays in the package (``minispec.training.corpus``).
"""
