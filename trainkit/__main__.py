"""`python -m trainkit ...` is the same as the `trainkit` console script (torchrun uses this form)."""

from trainkit.cli import main

if __name__ == "__main__":
    main()
