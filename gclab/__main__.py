"""``python -m gclab``: distributed gradient-coded training (see README)."""

from gclab.app import main

if __name__ == "__main__":
    main()
