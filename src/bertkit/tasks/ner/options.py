"""The ner family's command-line options (``bertkit finetune`` generates its flags from them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NerTaskOptions:
    """Which column of a CoNLL or CoNLL-U file ``--task ner`` learns."""

    tag_column: int | str | None = field(default=None, metadata={"cli_type": str})
    """ner: 0-based column of the tag, or for a CoNLL-U file its name: upos, xpos, deprel... (default: the last;
    CoNLL-U: upos)."""

    def __post_init__(self) -> None:
        if isinstance(self.tag_column, str) and self.tag_column.strip().isdigit():
            self.tag_column = int(self.tag_column)  # a number stays a number (7), a name (upos) a name
