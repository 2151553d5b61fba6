"""Stage 1: a WordPiece vocabulary learned from the same cleaned text the model will read."""

from __future__ import annotations

from pathlib import Path

from bertkit.data import CorpusOptions, CorpusStats, expand_inputs, read_documents
from bertkit.demo.demo_config import DemoConfig
from bertkit.demo.records import Vocabulary
from bertkit.demo.timing import timed
from bertkit.io import atomic_write_text
from bertkit.tasks.classification import ClassificationTask
from bertkit.tokenizer import Tokenizer


def learn_vocabulary(config: DemoConfig, out: Path) -> Vocabulary:
    """Train the tokenizer on the corpus (and the labeled training sentences, with ``task_text``) and save it
    to ``out/tokenizer``."""
    with timed(config.timings, "train the vocabulary"):
        inputs = list(config.corpus)
        if config.task_text:
            inputs.append(str(write_task_text(config.labeled_train, out / "task-text" / "train-sentences.txt")))
        documents = read_documents(expand_inputs(inputs), CorpusOptions(), CorpusStats())
        tokenizer = Tokenizer.train((text for doc in documents for text in doc.texts), vocab_size=config.vocab_size)
        tokenizer.save_pretrained(out / "tokenizer")
    return Vocabulary(tokenizer, out / "tokenizer", inputs)


def write_task_text(labeled_train: str, path: Path) -> Path:
    """The training sentences of the labeled file, labels dropped, as a text file: 20 sentences a paragraph."""
    sentences = [example.text for example in ClassificationTask().read(labeled_train).examples]
    paragraphs = ["\n".join(sentences[i : i + 20]) for i in range(0, len(sentences), 20)]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n\n".join(paragraphs) + "\n")
    return path
