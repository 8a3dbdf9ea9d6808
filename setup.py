"""Only the package list lives here; all other metadata is in pyproject.toml.

pyproject.toml cannot combine `find` (so new subpackages of harness/ are picked up without
editing a list) with explicit extra packages (harness.playbooks and harness.targets, mapped to the
top-level playbooks/ and fixtures/targets/ directories through [tool.setuptools.package-dir]).
"""
from setuptools import find_packages, setup

# minichain's directories are packages of data (its code, run.sh, config, fault patches)
TARGETS = ["harness.targets", "harness.targets.minichain", "harness.targets.minichain.minichain",
           "harness.targets.minichain.faults", "harness.targets.minichain.faults.more"]

# the healthy logs of fixtures/logs, against which `harness learn` checks a learned signature
setup(packages=find_packages(include=["harness", "harness.*"]) + ["harness.playbooks", "harness.healthy"] + TARGETS)
