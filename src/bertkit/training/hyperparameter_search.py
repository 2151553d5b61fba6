"""Hyperparameter search for fine-tuning, as the BERT paper does it: run a grid, keep the best run on dev.

``search(FinetuneConfig.from_options(...), SearchConfig(...))`` fine-tunes once per point of the grid (by
default the paper's: batch 16 or 32, learning rate 5e-5, 3e-5 or 2e-5, 2 to 4 epochs), each point a normal
:func:`~bertkit.training.finetune.finetune` run with the other options as given. It keeps only the best run's
model, by the task's main dev metric, and writes the table of all runs beside it:

* ``<output>/``: the best run's output (model, ``metrics.json``, dev predictions...), plus ``search.json`` (every
  run: its parameters, dev metric after each epoch, updates, seconds) and ``search.md`` (the same as a table);
* ``<output>.search/`` while it runs: ``journal.jsonl`` (one line when a run starts and one when it ends) and
  the runs in progress. A killed search continues with ``resume=True`` (``--resume``): finished runs are read
  from the journal, the interrupted one continues from its last checkpoint, or starts again without one.

``SearchConfig.budget`` (``--search-budget 30m``) bounds the whole search, resumed parts included: no run
starts after it, and the run in progress is cut at it (its learning rate decays over what the budget leaves;
it is marked ``cut`` in the table and still competes). ``SearchConfig.trials`` (``--search-trials N``) samples
N points with optuna's TPE sampler instead of running the grid, where a grid value may also be a range
(``{low, high, log}``); without optuna installed, only the grid runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError
from bertkit.io import atomic_write_text
from bertkit.notices import notice
from bertkit.training.checkpoint import latest_valid_checkpoint, read_trainer_state
from bertkit.training.finetune import FinetuneConfig, FinetuneResult, finetune
from bertkit.training.finetune_defaults import unset_defaults
from bertkit.training.train_config import parse_duration, read_options_file

Runner = Callable[[FinetuneConfig], FinetuneResult]
"""What trains one point of the search: ``finetune``, or a distillation."""

PAPER_GRID: dict[str, list[Any]] = {"micro_batch_size": [16, 32], "lr": [5e-5, 3e-5, 2e-5], "epochs": [2, 3, 4]}
"""The BERT paper's fine-tuning grid (section A.3): 18 runs."""

SEARCHABLE = {"lr": float, "micro_batch_size": int, "epochs": float, "warmup_ratio": float, "weight_decay": float}
"""The options a grid may vary, with their types."""


@dataclass
class SearchConfig:
    """How to search; the fine-tuning options themselves are the ``FinetuneConfig``'s."""

    grid: dict[str, Any] = field(default_factory=lambda: dict(PAPER_GRID))
    """Option -> list of values (every combination runs), or with ``trials`` also a range ``{low, high, log}``."""
    trials: int | None = None
    """Sample this many points with optuna (TPE) instead of running the whole grid."""
    budget: float | str | None = None
    """Wall-clock seconds for the whole search (or ``"30m"``, ``"2h"``); the best run so far wins when it ends."""

    def __post_init__(self) -> None:
        self.budget = seconds = parse_duration(self.budget)
        if seconds is not None and seconds <= 0:
            raise ConfigError(f"--search-budget must be positive, got {seconds:g}")
        if self.trials is not None and (not isinstance(self.trials, int) or self.trials < 1):
            raise ConfigError(f"--search-trials must be a positive integer, got {self.trials!r}")
        if not isinstance(self.grid, Mapping) or not self.grid:
            raise ConfigError("the search grid is empty; give at least one option with a list of values")
        for name, values in self.grid.items():
            if name not in SEARCHABLE:
                raise ConfigError(f"the search grid cannot vary {name!r}; it varies {', '.join(SEARCHABLE)}")
            if isinstance(values, Mapping):
                if self.trials is None:
                    raise ConfigError(f"{name}: a range needs --search-trials (optuna); a grid takes a list of values")
                if not {"low", "high"} <= set(values) or not values["low"] < values["high"]:
                    raise ConfigError(f"{name}: a range is {{low, high[, log]}} with low < high, got {dict(values)}")
            elif not isinstance(values, list) or not values:
                raise ConfigError(f"{name}: give a list of values in the search grid, got {values!r}")

    @classmethod
    def from_file(cls, path: str, **overrides: Any) -> SearchConfig:
        """The ``[search]`` table of a fine-tuning config file: grid options, and ``trials``/``budget``."""
        table = dict(read_options_file(path).get("search") or {})
        table = {key.replace("-", "_"): value for key, value in table.items()}
        settings = {k: table.pop(k) for k in ("trials", "budget") if k in table}
        settings.update({k: v for k, v in overrides.items() if v is not None})
        return cls(grid=table or dict(PAPER_GRID), **settings)


@dataclass
class Run:
    """One point of the search and how it went."""

    name: str
    params: dict[str, Any]
    status: str = "pending"
    """``done``, ``cut`` (stopped by the budget) or ``pending``."""
    main_metric: str = ""
    metric: float | None = None
    """The best dev value of the task's main metric over the run's evaluations."""
    per_epoch: list[float] = field(default_factory=list)
    batch_size: int | None = None
    epochs: float | None = None
    updates: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class SearchResult:
    output: Path | None
    """The best run's output directory (``None`` when a signal stopped the search: resume it)."""
    runs: list[Run]
    winner: Run | None
    main_metric: str
    stop_reason: str
    """``done``, ``budget`` or ``signal``."""
    signal: int | None = None
    """The signal that stopped the search, when ``stop_reason`` is ``signal``."""

    def table(self) -> list[dict[str, Any]]:
        return [run.to_dict() for run in self.runs]


# ------------------------------------------------------------------------------------------ points
def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the grid's order (the last option varies fastest)."""
    names = list(grid)
    return [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]


def _typed(params: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return {name: SEARCHABLE[name](value) for name, value in params.items()}
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"a search grid value is not a number: {exc}") from None


def _run_config(base: FinetuneConfig, params: Mapping[str, Any], output: Path, resume: bool) -> FinetuneConfig:
    """``base`` with one point's options; a varied batch or epochs is the user's, no longer sized to the data."""
    tracking = base.train.tracking  # one tracked run per point, grouped under the search's name
    group = tracking.run_group or tracking.run_name or Path(base.output).name
    train = base.train.with_options(**_typed(params), run_group=group, run_name=f"{group} {output.name}")
    still_unset = unset_defaults(params)
    return dataclasses.replace(
        base,
        output=str(output),
        train=train,
        sized=tuple(name for name in base.sized if name in still_unset),
        resume=resume,
        overwrite=not resume,
    )


class _Journal:
    """``journal.jsonl``: the grid, then a line when each run starts and when it ends (appended, flushed)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # the last line, cut by a kill
                continue
        return records

    def append(self, record: Mapping[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()


# ------------------------------------------------------------------------------------------ search
def search(config: FinetuneConfig, settings: SearchConfig | None = None, *, run: Runner | None = None) -> SearchResult:
    """Fine-tune ``config`` at every point of ``settings.grid`` (or ``trials`` sampled points) and keep the best
    run on dev in ``config.output``; see the module doc. ``run`` trains one point (default ``finetune``;
    distillation passes its own)."""
    settings = settings or SearchConfig()
    if config.dev_file is None:
        raise ConfigError("--search picks the best run on dev: give --dev")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError(
            "--search runs its fine-tuning runs one after another in one process: start it without torchrun"
        )
    output = Path(config.output)
    work = output.with_name(output.name + ".search")
    journal, records = _open_journal(config, settings, output, work)
    runs, spent, interrupted = _replay(records)
    standing = _Standing(runs, spent, _best(runs))
    points = _Points(settings, runs, interrupted)
    budget = parse_duration(settings.budget)
    notice(f"search: {points.describe()}; the best run on dev is kept in {output}")
    stop_reason = _run_points(config, points, journal, work, budget, standing, interrupted, run)
    best = standing.best
    if stop_reason == "signal":
        return SearchResult(None, runs, best, _main_metric(runs), "signal", signal=standing.signal)
    if best is None:
        raise ConfigError(f"the search budget ended before its first run finished; raise --search-budget ({work})")
    if stop_reason == "budget":
        notice(f"search: the budget of {budget:g} s ended the search after {len(runs)} runs")
    main_metric = _main_metric(runs)
    _finish(output, work, runs, best, main_metric, stop_reason)
    return SearchResult(output, runs, best, main_metric, stop_reason)


def _open_journal(
    config: FinetuneConfig, settings: SearchConfig, output: Path, work: Path
) -> tuple[_Journal, list[dict[str, Any]]]:
    """The search's journal and what it holds, refused when the output or an interrupted search is in the way;
    a new search writes its plan first."""
    if output.exists() and any(output.iterdir()) and not config.overwrite:
        raise ConfigError(f"--output {output} already exists and is not empty; choose another or pass --overwrite")
    journal = _Journal(work / "journal.jsonl")
    records = journal.records()
    if records and not config.resume:
        raise ConfigError(f"{work} holds an interrupted search; continue it with --resume or delete it")
    plan = {"grid": settings.grid, "trials": settings.trials}
    if records and records[0].get("plan") != json.loads(json.dumps(plan)):
        raise ConfigError(f"{work} holds a search over another grid; give the same grid and --resume, or delete it")
    work.mkdir(parents=True, exist_ok=True)
    if not records:
        journal.append({"plan": plan})
    return journal, records


@dataclass
class _Standing:
    """The finished runs, the seconds they spent and the best of them (the only run whose model is kept)."""

    runs: list[Run]
    spent: float
    best: Run | None
    signal: int | None = None
    """The signal that stopped a run, ending the search."""

    def add(self, run: Run, work: Path) -> None:
        self.spent += run.seconds
        if self.best is None or _better(run, self.best):
            if self.best is not None:
                shutil.rmtree(work / self.best.name, ignore_errors=True)  # only the best run's model is kept
            self.best = run
        else:
            shutil.rmtree(work / run.name, ignore_errors=True)
        self.runs.append(run)


def _run_points(
    config: FinetuneConfig,
    points: _Points,
    journal: _Journal,
    work: Path,
    budget: float | None,
    standing: _Standing,
    interrupted: Run | None,
    runner: Runner | None,
) -> str:
    """Run the points in turn until they are done, the budget is spent or a signal stops a run; the reason."""
    for name, params in points:
        if budget is not None and standing.spent >= budget:
            return "budget"
        if not (interrupted and interrupted.name == name):
            journal.append({"start": name, "params": params})
        interrupted = None
        left = budget - standing.spent if budget is not None else None
        notice(f"search: {name} of {points.total}: {_show(params)}")
        run = _train(config, Run(name, params), work, left, runner)
        if isinstance(run, int):
            standing.signal = run
            return "signal"
        standing.add(run, work)
        journal.append({"end": name, **run.to_dict()})
        points.tell(run)
        best = standing.best
        assert best is not None  # the run just added, or a better one
        notice(f"search: {name}: dev {run.main_metric} {_score(run)}; best so far {best.name} {_score(best)}")
        if run.status == "cut":  # the loop stopped it at max_time: the budget is spent
            return "budget"
    return "done"


def _train(config: FinetuneConfig, run: Run, work: Path, budget_left: float | None, runner: Runner | None) -> Run | int:
    """Fine-tune one point into ``work/<name>`` and fill in ``run``; the signal's number when one stopped it.

    An interrupted run continues from its last checkpoint, or starts again from nothing without one; with a
    budget, the run is cut where the budget ends (``max_time`` counts the time an interrupted run spent)."""
    run_dir = work / run.name
    partial = run_dir.with_name(run.name + ".partial")
    checkpoint = latest_valid_checkpoint(partial) if partial.is_dir() else None
    resume = checkpoint is not None
    if not resume:
        shutil.rmtree(partial, ignore_errors=True)
    run_config = _run_config(config, run.params, run_dir, resume)
    before = float(read_trainer_state(checkpoint)["elapsed"]) if checkpoint is not None else 0.0
    if budget_left is not None:
        max_time = budget_left + before  # the loop's max_time counts the time before the checkpoint too
        run_config = dataclasses.replace(run_config, train=run_config.train.with_options(max_time=max_time))
    if resume:
        notice(f"search: {run.name} continues from its last checkpoint")
    started = time.perf_counter()
    result = (runner or finetune)(run_config)
    if result.output is None:
        return result.train.signal or signal.SIGTERM
    run.main_metric = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))["main_metric"]
    run.status = "cut" if result.train.stop_reason == "max_time" else "done"
    run.metric = result.metrics.get(run.main_metric)
    run.per_epoch = [round(e[run.main_metric], 4) for e in result.evaluations if run.main_metric in e]
    sized = result.sizing or {}
    run.batch_size = sized.get("batch_size", run_config.train.batch.micro_batch_size)
    run.epochs = sized.get("epochs", run_config.train.duration.epochs)
    run.updates = result.train.step
    # the budget adds these up: kept to the millisecond, so that a short run does not count as no time, and
    # with the time an interrupted run trained before its checkpoint, which the search spent too
    run.seconds = round(before + time.perf_counter() - started, 3)
    return run


def _main_metric(runs: Sequence[Run]) -> str:
    return next((run.main_metric for run in runs if run.main_metric), "")


def _replay(records: Sequence[Mapping[str, Any]]) -> tuple[list[Run], float, Run | None]:
    """Finished runs, seconds spent, and the run that started without ending (the one a kill interrupted)."""
    runs: list[Run] = []
    started: dict[str, dict[str, Any]] = {}
    for record in records:
        if "start" in record:
            started[record["start"]] = record["params"]
        elif "end" in record:
            fields = {f.name for f in dataclasses.fields(Run)}
            runs.append(Run(**{k: v for k, v in record.items() if k in fields}))
            started.pop(record["end"], None)
    spent = sum(run.seconds for run in runs)
    interrupted = next((Run(name, params) for name, params in started.items()), None)
    return runs, spent, interrupted


def _better(run: Run, than: Run) -> bool:
    """Whether ``run`` scored higher on dev (a run without a score never wins; a tie keeps the earlier run)."""
    return run.metric is not None and (than.metric is None or run.metric > than.metric)


def _best(runs: Sequence[Run]) -> Run | None:
    best = None
    for run in runs:
        if best is None or _better(run, best):
            best = run
    return best if best is not None and best.metric is not None else None


def _value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _show(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {_value(value)}" for name, value in params.items())


class _Points:
    """The points still to run: the grid's in order, or optuna's samples (told each result)."""

    def __init__(self, settings: SearchConfig, finished: Sequence[Run], interrupted: Run | None) -> None:
        self.settings, self.finished, self.interrupted = settings, finished, interrupted
        self.study: Any = None
        self.trial: Any = None  # the optuna trial asked for last, told when its run ends
        if settings.trials is None:
            self.total = len(grid_points(settings.grid))
        else:
            self.total = settings.trials
            self.study = _optuna_study(settings.grid, finished)

    def describe(self) -> str:
        kind = f"{self.total} optuna trials" if self.study is not None else f"a grid of {self.total} runs"
        return f"{kind} over {', '.join(self.settings.grid)}; {len(self.finished)} finished"

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        done = {run.name for run in self.finished}
        if self.interrupted is not None:
            yield self.interrupted.name, self.interrupted.params
            done.add(self.interrupted.name)
        if self.study is None:
            for index, params in enumerate(grid_points(self.settings.grid), 1):
                name = f"run-{index:02d}"
                if name not in done:
                    yield name, params
            return
        index = len(done)
        while index < self.total:
            index += 1
            self.trial = self.study.ask(_distributions(self.settings.grid))
            yield f"trial-{index:02d}", dict(self.trial.params)

    def tell(self, run: Run) -> None:
        if self.study is None or run.metric is None:
            return
        if self.trial is not None:
            self.study.tell(self.trial, run.metric)
        else:  # the interrupted run of a resumed search, which the sampler did not ask for
            _add_finished(self.study, self.settings.grid, run)
        self.trial = None


def _distributions(grid: Mapping[str, Any]) -> dict[str, Any]:
    import optuna

    out: dict[str, Any] = {}
    for name, values in grid.items():
        if isinstance(values, Mapping):
            kind = (
                optuna.distributions.IntDistribution
                if SEARCHABLE[name] is int
                else optuna.distributions.FloatDistribution
            )
            out[name] = kind(values["low"], values["high"], log=bool(values.get("log", False)))
        else:
            out[name] = optuna.distributions.CategoricalDistribution(list(values))
    return out


def _optuna_study(grid: Mapping[str, Any], finished: Sequence[Run]) -> Any:
    try:
        import optuna
    except ImportError:
        raise ConfigError(
            "--search-trials samples with optuna, which is not installed (pip install optuna, or bertkit[search]); "
            "without it, drop --search-trials to run the grid"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=0))
    for run in finished:  # a resumed search tells the sampler what it already knows
        _add_finished(study, grid, run)
    return study


def _add_finished(study: Any, grid: Mapping[str, Any], run: Run) -> None:
    import optuna

    if run.metric is not None:
        trial = optuna.trial.create_trial(params=run.params, distributions=_distributions(grid), value=run.metric)
        study.add_trial(trial)


# ------------------------------------------------------------------------------------------ output
def _finish(output: Path, work: Path, runs: Sequence[Run], best: Run, main_metric: str, stop_reason: str) -> None:
    """Move the best run's directory to ``output`` with the table of all runs, then drop the work directory."""
    source = work / best.name
    table = {
        "main_metric": main_metric,
        "winner": best.name,
        "stop_reason": stop_reason,
        "runs": [run.to_dict() for run in runs],
    }
    atomic_write_text(source / "search.json", json.dumps(table, indent=2) + "\n")
    atomic_write_text(source / "search.md", search_table(runs, best, main_metric))
    if output.exists():
        shutil.rmtree(output)  # empty, or --overwrite
    source.rename(output)
    shutil.rmtree(work, ignore_errors=True)
    notice(f"search: wrote the best run ({best.name}, dev {main_metric} {_score(best)}) to {output}")


def _score(run: Run) -> str:
    return f"{run.metric:.4f}" if run.metric is not None else "none"


def search_table(runs: Sequence[Run], best: Run, main_metric: str) -> str:
    """The runs as a Markdown table: the searched parameters (each once, under its name), the batch and
    epochs each run trained with (epochs only when not searched), updates, dev metric per epoch and best,
    seconds, and the status (``winner``, ``cut`` or ``done``). Every column is named, and named once."""
    names = list(dict.fromkeys(name for run in runs for name in run.params))
    epochs = "epochs" not in names
    header = ["run", *names, "batch", *(["epochs"] if epochs else [])]
    header += ["updates", f"dev {main_metric} per epoch", "best", "seconds", "status"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for run in runs:
        trained_epochs = [f"{run.epochs:g}" if run.epochs is not None else ""] if epochs else []
        cells = [
            run.name,
            *(_value(run.params.get(n, "")) for n in names),
            str(run.batch_size),
            *trained_epochs,
            str(run.updates),
            " ".join(f"{value:.4f}" for value in run.per_epoch),
            _score(run),
            f"{run.seconds:.0f}",
            "winner" if run.name == best.name else run.status,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
