"""Write NLTK's movie_reviews (2,000 film reviews, CC BY 4.0, Pang & Lee 2004) as one pre-training text file:
a sentence per line (as distributed), a blank line between reviews, reviews in a fixed shuffled order.

Used for the in-domain pre-training experiment in docs/pretraining.md:
    python scripts/make_review_corpus.py ../shared/data/nltk/movie_reviews.zip runs/reviews/movie_reviews.txt
"""

import random
import sys
import zipfile
from pathlib import Path

with zipfile.ZipFile(sys.argv[1]) as archive:
    names = sorted(n for n in archive.namelist() if n.endswith(".txt") and ("/pos/" in n or "/neg/" in n))
    reviews = [
        "\n".join(line.strip() for line in archive.read(n).decode("utf-8").splitlines() if line.strip()) for n in names
    ]
random.Random(0).shuffle(reviews)
out = Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
print(f"{len(reviews)} reviews -> {out}")
