"""``python -m lsnpc.cli``: the command line."""

from lsnpc.cli import main

# Guarded: worker processes started with "spawn" import the parent's __main__ (as __mp_main__).
if __name__ == "__main__":
    main()
