"""The training run log: JSONL metrics, experiment trackers, loss/accuracy curves, throughput and MFU.

``metrics.jsonl`` is always written. The trackers of ``--report-to`` (TensorBoard events by default; MLflow,
W&B) get every record too, through :mod:`bertkit.training.tracking`. TensorBoard (``tensorboard`` package) and
the PNG (``matplotlib``) are optional: each is imported lazily and skipped with a one-line notice when missing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bertkit.config import BertConfig
from bertkit.io import atomic_path, atomic_write_text
from bertkit.notices import notice
from bertkit.training.tracking import Tracking, open_tracking

if TYPE_CHECKING:
    from bertkit.training.train_config import TrainConfig

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "curves.png"


def pretraining_flops_per_token(config: BertConfig, seq_len: int, masked_per_sequence: float) -> float:
    """Training FLOPs per token of BERT pre-training as bertkit executes it.

    The encoder's count comes from :meth:`BertConfig.flops_per_token`. Two parts run only where a loss reads
    them: the MLM head (H x H transform plus the H x V tied decoder) at the masked positions, and the last
    layer's queries, attention, output projection and feed-forward at those positions plus [CLS] (keys and
    values still cover every token).
    """
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    head_per_prediction = 3 * 2 * (h * h + h * v)
    pooler_nsp = 3 * 2 * (h * h + 2 * h) / seq_len
    rows = min(seq_len, masked_per_sequence + 1)
    last_layer_per_row = 3 * 2 * (2 * h * h + 2 * h * i + 2 * seq_len * h)  # Q, out, FFN, QK^T and PV
    skipped = last_layer_per_row * (1 - rows / seq_len)
    return config.flops_per_token(seq_len) - skipped + head_per_prediction * masked_per_sequence / seq_len + pooler_nsp


def measure_matmul_peak(
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    size: int | None = None,
    seconds: float = 1.0,
) -> float:
    """Measured dense-matmul FLOP/s of ``device``: the MFU denominator (a large square ``torch.mm``).

    Without a ``size``, the product grows from 256 by doubling up to 2048 (CPU) or 8192 (GPU) while one product
    takes under an eighth of ``seconds``: a dtype the hardware emulates (bf16 on a CPU without bf16 instructions
    runs at about 1 GFLOP/s) would otherwise take minutes at full size.

    The rate is that of the fastest product in the ``seconds`` window, not the mean: on cores shared with other
    jobs the mean counts their time as the hardware's, which makes the peak low and the MFU read high.
    """
    device = torch.device(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if size is None:
        size, largest = 256, (2048 if device.type == "cpu" else 8192)
        while size < largest and _one_product_seconds(device, dtype, size, sync) < seconds / 8:
            size *= 2
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(2):
        torch.mm(a, b)
    sync()
    fastest, runs, start = float("inf"), 0, time.perf_counter()
    while True:
        before = time.perf_counter()
        torch.mm(a, b)
        sync()
        now = time.perf_counter()
        fastest, runs = min(fastest, now - before), runs + 1
        if now - start >= seconds and runs >= 3:
            break
    return 2 * size**3 / fastest


def _one_product_seconds(device: torch.device, dtype: torch.dtype, size: int, sync: Callable[[], Any]) -> float:
    """Seconds one ``size``-square product takes (after one warm-up product)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(a, a)
    sync()
    start = time.perf_counter()
    torch.mm(a, a)
    sync()
    return time.perf_counter() - start


DATASHEET_PEAKS: dict[str, dict[str, float]] = {
    # Dense (no 2:4 sparsity) tensor-core FLOP/s per GPU from NVIDIA's datasheets (SXM parts). fp32 training
    # runs its matmuls in TF32 on these GPUs (see precision.py), so "fp32" is the TF32 peak.
    "H200": {"bf16": 989e12, "fp16": 989e12, "fp32": 494.5e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "fp32": 494.5e12},
    "A100": {"bf16": 312e12, "fp16": 312e12, "fp32": 156e12},
}
"""Datasheet peaks by GPU family (a substring of the device name) and resolved precision."""


def datasheet_peak(
    device_name: str, precision: str, table: Mapping[str, Mapping[str, float]] = DATASHEET_PEAKS
) -> float | None:
    """The datasheet dense peak FLOP/s of the GPU called ``device_name`` at ``precision`` (``bf16``, ``fp16``,
    ``fp32``); ``None`` for a GPU or precision the table does not know."""
    for family, peaks in table.items():
        if family.lower() in device_name.lower():
            return peaks.get(precision)
    return None


@dataclass
class PeakFlops:
    """The MFU denominator of one device, and where it comes from."""

    flops: float
    """Peak FLOP/s that MFU divides by."""
    source: str
    """``datasheet <GPU> <precision>`` or ``measured <precision> matmul``."""
    measured: float
    """The measured dense-matmul FLOP/s at the same precision (the second figure on a GPU)."""


def mfu_peak(
    device: torch.device,
    precision: str,
    *,
    device_name: str | None = None,
    table: Mapping[str, Mapping[str, float]] = DATASHEET_PEAKS,
    measure: Callable[[torch.device, torch.dtype], float] | None = None,
) -> PeakFlops:
    """The peak MFU is reported against, for a resolved ``precision`` (``fp32``, ``bf16`` or ``fp16``).

    On a GPU the table knows, its datasheet dense peak, which is how MFU is reported in the field; the measured
    matmul peak is kept as a second figure. Elsewhere (CPU, other GPUs) the measured matmul peak.
    """
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    measured = (measure or (lambda d, t: measure_matmul_peak(d, t, seconds=0.5)))(device, dtype)
    if device.type == "cuda":
        name = device_name if device_name is not None else torch.cuda.get_device_name(device)
        peak = datasheet_peak(name, precision, table)
        if peak is not None:
            return PeakFlops(peak, f"datasheet {name} {precision}", measured)
    return PeakFlops(measured, f"measured {precision} matmul", measured)


class MetricsLogger:
    """Writes records ``{"step": int, "split": "train"|"eval", ...}`` to ``metrics.jsonl`` and sends them to the
    run's trackers (TensorBoard by default).

    On resume, records after the resumed step are dropped from the file first, so that the file shows one
    trajectory, the one the weights followed.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike,
        *,
        enabled: bool = True,
        resume_step: int | None = None,
        resume_history: list[dict[str, Any]] | None = None,
        config: TrainConfig | None = None,
        device: str | None = None,
    ) -> None:
        """``resume_history``: the records a resumed checkpoint saved; when given, the file is reset to
        exactly them (records logged after that checkpoint at its own step, e.g. a final evaluation, would
        otherwise appear twice). ``config``: the run's options, which name the trackers (``config.tracking``;
        TensorBoard alone without it) and are sent to them as parameters, with ``device`` in the system
        information."""
        self.dir = Path(output_dir)
        self.enabled = enabled
        self.path = self.dir / METRICS_FILE
        self.history: list[dict[str, Any]] = []
        self.tracking = Tracking([], self.dir, {})
        if not enabled:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            kept = []
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill
                    continue
                if resume_step is not None and record.get("step", 0) <= resume_step:
                    kept.append(record)
            if resume_history is not None:
                kept = [dict(r) for r in resume_history]
            self.history = kept
            atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        # Open for the whole run, each record appended and flushed as it is logged; close() closes it.
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self.tracking = open_tracking(config, self.dir, resume_step=resume_step, device=device)

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {k: (float(v) if isinstance(v, torch.Tensor) else v) for k, v in record.items()}
        self.history.append(record)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        self.tracking.log(record)

    def close(self, plot: bool = True, stop_reason: str | None = None) -> None:
        """Close the file and the tracked runs (``KILLED`` when ``stop_reason`` is ``signal``: resume continues
        them), then draw the curves."""
        if not self.enabled:
            return
        self._file.close()
        self.tracking.finish("KILLED" if stop_reason == "signal" else "FINISHED")
        if plot and self.history:
            plot_curves(self.history, self.dir / PLOT_FILE)


def plot_curves(history: list[dict[str, Any]], path: Path) -> Path | None:
    """Loss and accuracy curves (train and eval) as a PNG; ``None`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        notice("matplotlib is not installed; skipping the curves PNG (pip install matplotlib)")
        return None
    keys_loss = sorted({k for r in history for k in r if k.endswith("loss")})
    keys_acc = sorted({k for r in history for k in r if k.endswith("acc") or k.endswith("accuracy")})
    panels = [("loss", keys_loss), ("accuracy", keys_acc)]
    panels = [p for p in panels if p[1]]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (title, keys) in zip(axes[0], panels):
        for split in ("train", "eval"):
            rows = [r for r in history if r.get("split", "train") == split]
            for key in keys:
                points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
                if points:
                    xs, ys = zip(*points)
                    ax.plot(xs, ys, label=f"{split} {key}", marker="o" if split == "eval" else None, markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path
