"""Makes notebooks/conftest.py importable as notebooks.conftest, so it does not shadow
tests/conftest.py (which tests import as ``conftest``)."""
