"""Build data/polarity/{train,dev}.tsv from NLTK's sentence_polarity package (CC BY 4.0, Pang & Lee 2005).

Run once by the maintainers: python scripts/make_polarity_split.py ../shared/data/nltk/sentence_polarity.zip
"""

import random
import sys
import zipfile
from pathlib import Path

out = Path(__file__).resolve().parents[1] / "data" / "polarity"
rows = []
with zipfile.ZipFile(sys.argv[1]) as archive:
    for label in ("pos", "neg"):
        text = archive.read(f"sentence_polarity/rt-polarity.{label}").decode("utf-8")
        rows += [(line.strip(), "positive" if label == "pos" else "negative") for line in text.splitlines() if line.strip()]
random.Random(0).shuffle(rows)
for name, part in (("dev", rows[:1000]), ("train", rows[1000:])):
    with open(out / f"{name}.tsv", "w", encoding="utf-8") as handle:
        handle.write("sentence\tlabel\n")
        handle.writelines(f"{s.replace(chr(9), ' ')}\t{label}\n" for s, label in part)
