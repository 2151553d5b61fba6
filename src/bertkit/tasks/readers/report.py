"""What a reader did with its input: records read, used and skipped (by reason), and how it decided."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReadReport:
    """What a reader did with its input: records read, used and skipped (by reason), and how it decided."""

    source: str
    format: str
    unit: str = "rows"
    used: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Decisions worth a word, e.g. how the header was chosen."""
    assumptions: list[str] = field(default_factory=list)
    """Guesses made for the user (which of two unnamed columns is the label), each said on a line of its own."""
    truncated: int | None = None
    """Examples cut at ``max_seq_length`` (set when they are featurized)."""

    @property
    def read(self) -> int:
        return self.used + sum(self.skipped.values())

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    def line(self) -> str:
        """One line for stderr: ``sst2.tsv (tsv): read 301 rows, used 300, skipped 1 (1 header line)``."""
        reasons = ", ".join(f"{n} {why}" for why, n in self.skipped.items())
        skipped = sum(self.skipped.values())
        text = f"{self.source} ({self.format}): read {self.read} {self.unit}, used {self.used}, skipped {skipped}"
        text += f" ({reasons})" if reasons else ""
        return text + "".join(f"; {note}" for note in self.notes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "format": self.format,
            "unit": self.unit,
            "read": self.read,
            "used": self.used,
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
        }
        if self.assumptions:
            out["assumptions"] = list(self.assumptions)
        if self.truncated is not None:
            out["truncated"] = self.truncated
        return out
