"""Only the package list lives here; all other metadata is in pyproject.toml.

pyproject.toml cannot combine `find` (so new subpackages of harness/ are picked up without
editing a list) with an explicit extra package (harness.playbooks, mapped to the top-level
playbooks/ directory through [tool.setuptools.package-dir]).
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["harness", "harness.*"]) + ["harness.playbooks"])
