"""gclab: gradient-coded distributed training on Ray, and a trace-driven simulator."""

from pathlib import Path

#: The Hydra config tree (``gclab/conf/``, package data), absolute so both apps run from any
#: directory and from an installed wheel.
CONF_DIR = Path(__file__).resolve().parent / "conf"
