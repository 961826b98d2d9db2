"""The training corpus and its split (``corpus.py``), which notebook 02 and the tests read. The
scripts that rebuild the shipped checkpoints live beside the package, in ``training/``
(``python -m training.train``). Nothing at serving time imports it."""
