"""The trackers of one run (:class:`Tracking`), opened from the options, fed by ``MetricsLogger``; the model
artifact, the parameters and the system information they receive."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertkit.io import atomic_write_text
from bertkit.notices import notice
from bertkit.training.tracking.backends import make_tracker
from bertkit.training.tracking.tracker import RunInfo, Tracker

if TYPE_CHECKING:
    from bertkit.training.train_config import TrackingConfig, TrainConfig

STATE_FILE = "tracking.json"
"""In the output folder: each tracker's run id, the last step sent per split, and whether to log the model."""


class Tracking:
    """Every tracker of one run, fed records as ``metrics.jsonl`` gets them; a failing one is warned about once
    and dropped."""

    def __init__(self, trackers: list[Tracker], state_path: Path, state: dict[str, Any]) -> None:
        self.trackers = trackers
        self.state_path = state_path
        self.state = state
        self.sent: dict[str, int] = dict(state.get("logged", {})) if state.get("resumed") else {}

    def _call(self, tracker: Tracker, what: str, *args: Any) -> Any:
        try:
            return getattr(tracker, what)(*args)
        except Exception as exc:  # a tracker never stops training
            reason = (str(exc).strip().splitlines() or [""])[0][:200]
            notice(
                f"warning: {tracker.name} failed ({type(exc).__name__}: {reason}); reporting to it stops here, "
                "metrics still go to metrics.jsonl"
            )
            self.trackers.remove(tracker)
            return None

    def start(self, run: RunInfo, params: Mapping[str, Any]) -> None:
        runs = self.state.setdefault("runs", {})
        for tracker in list(self.trackers):
            run.stored = dict(runs.get(tracker.name, {})) if run.resume_step is not None else {}
            opened = self._call(tracker, "start", run)
            if opened is None:
                continue
            runs[tracker.name] = opened
            self._call(tracker, "log_params", params)
        self._save()

    def log(self, record: Mapping[str, Any]) -> None:
        """Send the numbers of one ``metrics.jsonl`` record as ``<split>/<name>`` at its step."""
        if not self.trackers:
            return
        split, step = str(record.get("split", "train")), int(record["step"])
        metrics = {
            f"{split}/{key}": float(value)
            for key, value in record.items()
            if key not in ("step", "split") and isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        if not metrics:
            return
        already = step <= self.sent.get(split, -1)
        for tracker in list(self.trackers):
            if not already or tracker.rewinds:
                self._call(tracker, "log_metrics", metrics, step)
        if not already:
            self.sent[split] = step
            self._save()

    def finish(self, status: str) -> None:
        for tracker in list(self.trackers):
            self._call(tracker, "finish", status)
        self.trackers = []

    def _save(self) -> None:
        if self.state.get("runs"):
            state = {key: value for key, value in self.state.items() if key != "resumed"}
            try:
                atomic_write_text(self.state_path, json.dumps({**state, "logged": self.sent}, indent=1) + "\n")
            except OSError as exc:
                notice(f"warning: cannot write {self.state_path} ({exc}); a resumed run would start new tracked runs")


def open_tracking(
    config: TrainConfig | None,
    output_dir: Path,
    *,
    resume_step: int | None = None,
    device: str | None = None,
) -> Tracking:
    """The trackers ``config.tracking`` asks for, started (or reopened, on resume) with the run's parameters."""
    from bertkit.training.train_config import TrackingConfig

    settings = config.tracking if config is not None else TrackingConfig()
    names = settings.trackers()
    trackers = [t for t in (make_tracker(n, settings, explicit=settings.report_to is not None) for n in names) if t]
    path = output_dir / STATE_FILE
    state: dict[str, Any] = {"log_model": settings.log_model}
    if resume_step is not None and path.is_file():
        try:
            state = {**json.loads(path.read_text(encoding="utf-8")), "log_model": settings.log_model, "resumed": True}
        except (OSError, ValueError):
            notice(f"warning: cannot read {path}; the resumed run starts new tracked runs")
    tracking = Tracking(trackers, path, state)
    if trackers:
        run = RunInfo(_run_name(settings, output_dir), settings.run_group, _tags(settings), output_dir, resume_step)
        params = {**(run_params(config) if config is not None else {}), **system_info(device)}
        tracking.start(run, params)
    return tracking


def log_model(run_dir: Path, model_dir: Path) -> None:
    """Send ``model_dir`` as the artifact ``model`` to the tracked runs recorded in ``run_dir/tracking.json``,
    when the run asked for it (``log_model``); a failure is a warning."""
    from bertkit.training.train_config import TrackingConfig

    path = run_dir / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        state = {}
    if not state.get("log_model"):
        return
    settings = TrackingConfig(tracking_uri=state.get("runs", {}).get("mlflow", {}).get("tracking_uri"))
    for name, stored in state.get("runs", {}).items():
        tracker = make_tracker(name, settings, explicit=False)
        if tracker is None or tracker.rewinds:  # TensorBoard keeps no artifacts
            continue
        tracking = Tracking([tracker], path, {})
        run = RunInfo(str(stored.get("name", run_dir.name)), None, {}, run_dir, resume_step=0, stored=dict(stored))
        if tracking._call(tracker, "start", run) is not None:
            tracking._call(tracker, "log_artifact", model_dir, "model")
            tracking.finish("FINISHED")


def run_params(config: TrainConfig) -> dict[str, Any]:
    """The parameters sent: the caller's own options (``extra["config"]``), the training options, and the rest of
    ``extra`` (``sizing``...), nested values flattened to ``group.key``."""
    flat = config.to_dict()
    extra = dict(flat.pop("extra", {}) or {})
    own = extra.pop("config", {})
    return {**_flatten(own), **_flatten(flat), **_flatten(extra)}


def run_context(options: Mapping[str, Any]) -> dict[str, Any]:
    """A command's own options (its config's ``to_dict()``, the training options left out), JSON-safe, for
    ``TrainConfig.extra["config"]``: trackers receive them as parameters, and checkpoints keep them."""
    own = {key: value for key, value in options.items() if key != "train"}
    loaded: dict[str, Any] = json.loads(json.dumps(own, default=str))
    return loaded


def system_info(device: str | None) -> dict[str, Any]:
    """``system.*`` parameters: where the run trains and with what."""
    import torch

    import bertkit

    info: dict[str, Any] = {
        "system.device": device or "cpu",
        "system.threads": torch.get_num_threads(),
        "system.world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "system.torch": torch.__version__,
        "system.bertkit": bertkit.__version__,
        "system.python": platform.python_version(),
        "system.platform": platform.platform(),
    }
    if device is not None and device.startswith("cuda") and torch.cuda.is_available():
        info["system.gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(list(value), default=str)
        else:
            out[name] = value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
    return out


def _run_name(settings: TrackingConfig, output_dir: Path) -> str:
    if settings.run_name:
        return settings.run_name
    name = output_dir.resolve().name
    return name.removesuffix(".partial")  # fine-tuning trains in <output>.partial/


def _tags(settings: TrackingConfig) -> dict[str, str]:
    tags = {}
    for tag in settings.tags or ():
        key, _, value = tag.partition("=")
        tags[key.strip()] = value.strip()
    return tags
