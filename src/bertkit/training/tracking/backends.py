"""One class per ``--report-to`` tracker, each behind :class:`bertkit.training.tracking.Tracker`.

Each imports its library when it is created, so that a run that does not ask for it never pays for the import;
whether the library is installed is checked earlier, when the options are read
(:class:`bertkit.training.train_config.TrackingConfig`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertkit.notices import notice

if TYPE_CHECKING:
    from bertkit.training.tracking.tracker import RunInfo, Tracker
    from bertkit.training.train_config import TrackingConfig

DEFAULT_NAME = "bertkit"
"""The MLflow experiment and the W&B project when neither an option nor the environment names one."""


def make_tracker(name: str, settings: TrackingConfig, *, explicit: bool) -> Tracker | None:
    """The tracker called ``name``; ``None`` (with a notice) for TensorBoard when it is not installed and was not
    asked for by name (the default), or when another library fails to import."""
    try:
        if name == "tensorboard":
            return TensorBoardTracker()
        if name == "mlflow":
            return MlflowTracker(settings)
        if name == "wandb":
            return WandbTracker(settings)
    except ImportError as exc:
        if name == "tensorboard" and not explicit:
            notice("tensorboard is not installed; skipping TensorBoard events (pip install tensorboard)")
        else:
            notice(f"warning: cannot import {name} ({exc}); the run is not reported to it")
    return None


class TensorBoardTracker:
    """Event files in ``<output>/tensorboard``; a resumed run purges the events after its checkpoint."""

    name = "tensorboard"
    rewinds = True

    def __init__(self) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer_class = SummaryWriter
        self.writer: Any = None

    def start(self, run: RunInfo) -> dict[str, Any]:
        self.writer = self._writer_class(log_dir=str(run.output_dir / "tensorboard"), purge_step=run.resume_step)
        return {}

    def log_params(self, params: Mapping[str, Any]) -> None:
        lines = [f"| {key} | {value} |" for key, value in sorted(params.items())]
        self.writer.add_text("params", "\n".join(["| parameter | value |", "|---|---|", *lines]))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)

    def log_artifact(self, path: Path, name: str) -> None:
        """TensorBoard keeps no artifacts."""

    def finish(self, status: str) -> None:
        self.writer.close()


class MlflowTracker:
    """A run in an MLflow experiment, through ``MlflowClient`` (no global active run, so that runs of a search
    in one process never mix)."""

    name = "mlflow"
    rewinds = False
    MAX_PARAM = 6000
    """MLflow's longest parameter value."""

    def __init__(self, settings: TrackingConfig) -> None:
        from mlflow.tracking import MlflowClient

        uri = settings.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
        if uri is not None and uri.startswith("file:"):
            # MLflow 3 refuses its file store unless asked: a `file:` URI given here is that request.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment = settings.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_NAME
        self.run_id = ""
        self.known: dict[str, str] = {}

    def start(self, run: RunInfo) -> dict[str, Any]:
        if run.stored.get("run_id"):
            self.run_id = str(run.stored["run_id"])
            self.client.update_run(self.run_id, status="RUNNING")
            self.known = dict(self.client.get_run(self.run_id).data.params)
        else:
            found = self.client.get_experiment_by_name(self.experiment)
            experiment_id = found.experiment_id if found is not None else self.client.create_experiment(self.experiment)
            tags = {**run.tags, **({"bertkit.group": run.group} if run.group else {})}
            self.run_id = self.client.create_run(experiment_id, run_name=run.name, tags=tags).info.run_id
        return {"run_id": self.run_id, "name": run.name, "tracking_uri": self.client.tracking_uri}

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        # A parameter cannot change once logged: a resumed run sends only the ones the run lacks.
        new = [Param(key, str(value)[: self.MAX_PARAM]) for key, value in params.items() if key not in self.known]
        for start in range(0, len(new), 100):  # MLflow's batch limit
            self.client.log_batch(self.run_id, params=new[start : start + 100])
        self.known.update({p.key: p.value for p in new})

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(key, value, now, step) for key, value in metrics.items()])

    def log_artifact(self, path: Path, name: str) -> None:
        self.client.log_artifacts(self.run_id, str(path), artifact_path=name)

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status)


class WandbTracker:
    """A W&B run (``WANDB_MODE=offline`` writes it under ``WANDB_DIR`` for ``wandb sync`` later)."""

    name = "wandb"
    rewinds = False

    def __init__(self, settings: TrackingConfig) -> None:
        import wandb

        self.wandb = wandb
        self.project = settings.project or os.environ.get("WANDB_PROJECT") or DEFAULT_NAME
        self.run: Any = None

    def start(self, run: RunInfo) -> dict[str, Any]:
        stored_id = run.stored.get("run_id")
        self.run = self.wandb.init(
            project=str(run.stored.get("project", self.project)),
            name=run.name,
            group=run.group,
            tags=[f"{key}={value}" if value else key for key, value in run.tags.items()] or None,
            id=str(stored_id) if stored_id else None,
            resume="allow" if stored_id else None,
            settings=self.wandb.Settings(console="off", silent=True),
        )
        return {"run_id": self.run.id, "name": run.name, "project": self.run.project}

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.run.config.update(dict(params), allow_val_change=True)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def log_artifact(self, path: Path, name: str) -> None:
        artifact = self.wandb.Artifact(f"{name}-{self.run.id}", type="model")
        artifact.add_dir(str(path))
        self.run.log_artifact(artifact)

    def finish(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "FINISHED" else 1)
