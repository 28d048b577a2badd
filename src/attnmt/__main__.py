"""`python -m attnmt` is the same as the `attnmt` command (and what torchrun runs)."""

from attnmt.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
