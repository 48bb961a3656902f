"""gclab: gradient-coded distributed training on Ray, and a trace-driven simulator."""

from pathlib import Path

#: The Hydra config tree (``conf/``), absolute so both apps run from any directory.
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
