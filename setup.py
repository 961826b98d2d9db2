"""Leaves the notebooks' support out of the wheel (pyproject.toml's ``[tool.minispec.wheel]``,
derived by tools/wheel_scope.py); every other setting is in pyproject.toml.

setuptools takes whole packages from ``packages.find``; this drops single modules from them. An
editable install (``make lab``) maps the package folder itself, so the dropped modules still import
from a checkout, next to the notebooks they serve.
"""

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

LISTED = tomllib.loads(Path(__file__).with_name("pyproject.toml").read_text())["tool"]["minispec"]["wheel"]["notebook-only"]


class BuildPy(build_py):
    def find_package_modules(self, package, package_dir):
        return [(pkg, module, path) for pkg, module, path in super().find_package_modules(package, package_dir)
                if not any(fnmatchcase(Path(path).as_posix(), entry) for entry in LISTED)]


setup(cmdclass={"build_py": BuildPy})
