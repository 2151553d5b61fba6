"""Experiment tracking: the run's parameters and metrics sent to TensorBoard, MLflow and Weights & Biases.

``--report-to`` (:class:`bertkit.training.train_config.TrackingConfig`) names the trackers; each is one class of
:mod:`bertkit.training.tracking.backends` behind the :class:`Tracker` protocol, and :class:`Tracking` drives
them all for :class:`bertkit.training.run_log.MetricsLogger`, which stays the one place the loop logs through.
``metrics.jsonl`` is written whatever happens to a tracker.

* Sent: the resolved options as parameters (nested values flattened to ``group.key``; what the caller put in
  ``TrainConfig.extra`` too, such as fine-tuning's sizing decision), system information (``system.*``: device,
  threads, torch and bertkit versions), every metric as ``<split>/<name>`` at its step, the run's name, group
  and tags; with ``log_model``, the final model folder as an artifact (:func:`log_model`).
* Resume continues the same tracked run: ``tracking.json`` in the output folder keeps each tracker's run id and
  the last step sent per split; a resumed run reopens those runs and does not send a step again (the steps
  between the checkpoint and the interruption were sent already; resume replays them with the same data
  order and random streams). TensorBoard rewinds its own event files instead (``purge_step``).
* A tracker that fails (server down, disk full) never stops training: one warning line, then it is off for the
  rest of the run.
"""

from bertkit.training.tracking.session import (
    STATE_FILE,
    Tracking,
    log_model,
    open_tracking,
    run_context,
    run_params,
    system_info,
)
from bertkit.training.tracking.tracker import RunInfo, Tracker

__all__ = [
    "STATE_FILE",
    "RunInfo",
    "Tracker",
    "Tracking",
    "log_model",
    "open_tracking",
    "run_context",
    "run_params",
    "system_info",
]
