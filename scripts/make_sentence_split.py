"""Build a labeled sentence set (dev.tsv: 1,000 sentences, train.tsv: the rest) from an NLTK package.

* ``polarity``: NLTK's sentence_polarity (CC BY 4.0, Pang & Lee 2005), labels positive/negative. This is how
  the shipped data/polarity/ was made, once, by the maintainers:
      python scripts/make_sentence_split.py polarity ../shared/data/nltk/sentence_polarity.zip data/polarity
* ``subjectivity``: NLTK's subjectivity (CC BY 4.0, Pang & Lee 2004), labels objective (plot summaries) and
  subjective (review snippets); used by an experiment in docs/pretraining.md:
      python scripts/make_sentence_split.py subjectivity ../shared/data/nltk/subjectivity.zip runs/subjectivity
"""

import random
import sys
import zipfile
from pathlib import Path

SOURCES = {
    "polarity": [("sentence_polarity/rt-polarity.pos", "positive"), ("sentence_polarity/rt-polarity.neg", "negative")],
    "subjectivity": [
        ("subjectivity/plot.tok.gt9.5000", "objective"),
        ("subjectivity/quote.tok.gt9.5000", "subjective"),
    ],
}

kind, archive_path, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
rows = []
with zipfile.ZipFile(archive_path) as archive:
    for member, label in SOURCES[kind]:
        text = archive.read(member).decode("utf-8", errors="replace")
        rows += [(line.strip(), label) for line in text.splitlines() if line.strip()]
random.Random(0).shuffle(rows)
out.mkdir(parents=True, exist_ok=True)
for name, part in (("dev", rows[:1000]), ("train", rows[1000:])):
    with open(out / f"{name}.tsv", "w", encoding="utf-8") as handle:
        handle.write("sentence\tlabel\n")
        handle.writelines(f"{s.replace(chr(9), ' ')}\t{label}\n" for s, label in part)
