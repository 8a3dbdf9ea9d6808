"""`python -m harness.cli …` is `harness …`."""

from . import main

main()
