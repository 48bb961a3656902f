"""Experiment trackers: Weights & Biases, or none. The app talks to this interface only."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class Logger:
    """No-op tracker (``logger=none``); also the interface :class:`WandbLogger` fills in."""

    def start(
        self,
        config: dict[str, Any],
        run_dir: Path,
        name: str,
        group: str | None,
        tags: list[str],
        resume: bool = False,
    ) -> None:
        """Open a run that records ``config``; files go under ``run_dir``.

        ``resume``: continue the tracker run that an earlier segment of this run directory
        opened, rather than a new one.
        """

    def log(self, record: dict[str, Any], step: int) -> None:
        """Log one metrics record (a round or an evaluation) as the run's ``step``-th record."""

    def finish(self, summary: dict[str, Any], decode_ms: list[float], failed: bool = False) -> None:
        """Close the run with its summary and decode latencies; called even on failure."""


class Mode(StrEnum):
    """``logger.mode`` of :class:`WandbLogger`: W&B's modes, or ``auto``."""

    auto = "auto"
    online = "online"
    offline = "offline"
    disabled = "disabled"


#: Where a run directory keeps its W&B run id (beside W&B's own files).
ID_FILE = Path("wandb") / "gclab-run-id"


class WandbLogger(Logger):
    """Logs to W&B; ``mode=auto`` is online when an API key is configured, else offline.

    The API key comes only from the environment or ``wandb login``, never the config.
    The run id is kept in the run directory (:data:`ID_FILE`): a resumed run continues
    the same W&B run (``resume="allow"``); offline, each segment writes its own
    ``offline-run-*`` directory under that id, with steps that continue the earlier ones.
    """

    def __init__(
        self,
        project: str = "gclab",
        entity: str | None = None,
        mode: Mode = Mode.auto,
        tags: Sequence[str] = (),
    ) -> None:
        self.project, self.entity, self.mode, self.tags = project, entity, mode, list(tags)
        self.run = None

    def _resolve_mode(self) -> str:
        if self.mode != "auto":
            return str(self.mode)
        if os.environ.get("WANDB_MODE"):
            return os.environ["WANDB_MODE"]
        import wandb

        return "online" if wandb.api.api_key else "offline"

    def start(
        self,
        config: dict[str, Any],
        run_dir: Path,
        name: str,
        group: str | None,
        tags: list[str],
        resume: bool = False,
    ) -> None:
        import wandb

        mode = self._resolve_mode()
        id_file = run_dir / ID_FILE
        if resume and id_file.is_file():
            run_id = id_file.read_text(encoding="utf-8").strip()
        else:
            run_id = uuid.uuid4().hex[:8]  # W&B ids: up to 64 letters and digits
            id_file.parent.mkdir(parents=True, exist_ok=True)
            id_file.write_text(run_id + "\n", encoding="utf-8")
        self.run = wandb.init(
            project=self.project,
            entity=self.entity,
            mode=mode,
            dir=str(run_dir),
            id=run_id,
            resume="allow",
            name=name,
            group=group,
            tags=[*self.tags, *tags],
            config=config,
            reinit="create_new",
        )
        # every metric is charted against `round` by default; virtual_time and
        # wall_time are logged alongside so charts can switch their x-axis to them
        self.run.define_metric("round")
        self.run.define_metric("*", step_metric="round")
        log.info("W&B run %s (%s mode) in %s", self.run.name, mode, run_dir)

    def log(self, record: dict[str, Any], step: int) -> None:
        if self.run is not None:
            self.run.log(record, step=step)

    def finish(self, summary: dict[str, Any], decode_ms: list[float], failed: bool = False) -> None:
        if self.run is None:
            return
        import wandb

        if decode_ms:  # in the summary: a history row would take a step a resumed run needs
            self.run.summary["decode_ms_histogram"] = wandb.Histogram(decode_ms)
        for key, value in summary.items():
            self.run.summary[key] = value
        self.run.finish(exit_code=1 if failed else 0)
        self.run = None
