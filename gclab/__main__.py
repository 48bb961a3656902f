"""``python -m gclab``: distributed gradient-coded training (see README)."""

from gclab import cli
from gclab.app import main

if __name__ == "__main__":
    cli.run(main, "config", "gclab: error: ")
