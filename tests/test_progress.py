"""Progress output fits where it goes: a redrawn bar in a terminal, a plain line every N seconds elsewhere."""

from __future__ import annotations

import io

from bertkit.progress import Progress, is_terminal, track


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_redirected_stream_gets_a_plain_line_every_interval_and_no_carriage_returns():
    stream, clock = io.StringIO(), Clock()
    progress = Progress(100, desc="train", unit="step", stream=stream, interval=10, clock=clock)
    assert not progress.is_bar
    for _ in range(30):
        clock.now += 1
        progress.update(1)
        progress.set_postfix({"loss": "2.5000"})
    progress.write("step 30 eval: accuracy 0.5")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines == [
        "train: 10/100 step (10%), 1.00 step/s, 10s, loss 2.5000",
        "train: 20/100 step (20%), 1.00 step/s, 20s, loss 2.5000",
        "train: 30/100 step (30%), 1.00 step/s, 30s, loss 2.5000",
        "step 30 eval: accuracy 0.5",
    ]


def test_closing_writes_the_last_count_once():
    stream, clock = io.StringIO(), Clock()
    with Progress(None, desc="prepare-data", unit="B", unit_scale=True, stream=stream, clock=clock) as progress:
        clock.now = 4
        progress.update(12_300_000)
    progress.close()  # a second close writes nothing more
    assert stream.getvalue() == "prepare-data: 12.3MB, 3.1MB/s, 4s\n"


def test_a_terminal_gets_a_bar_that_redraws_in_place():
    stream = Terminal()
    assert is_terminal(stream) and not is_terminal(io.StringIO())
    with Progress(5, desc="train", unit="step", stream=stream, mininterval=0) as progress:
        assert progress.is_bar
        for _ in range(5):
            progress.update(1)
    assert "\r" in stream.getvalue() and "5/5" in stream.getvalue()


def test_disabled_shows_nothing_and_track_counts_items():
    stream = io.StringIO()
    progress = Progress(3, desc="x", stream=stream, enabled=False)
    progress.update(3)
    progress.write("hidden")
    progress.close()
    assert stream.getvalue() == ""
    assert list(track([1, 2, 3], desc="predict", unit="batch", stream=stream)) == [1, 2, 3]
    assert stream.getvalue().startswith("predict: 3/3 batch (100%)")


def test_a_scaled_count_and_its_total_share_their_unit():
    """Bytes against bytes: ``1.5MB/3.0MB``, in the plain line and on the bar, never ``913kB`` against ``361k``."""
    stream, clock = io.StringIO(), Clock()
    with Progress(3_000_000, desc="prepare-data", unit="B", unit_scale=True, stream=stream, clock=clock) as progress:
        clock.now = 1
        progress.update(1_500_000)
    assert stream.getvalue() == "prepare-data: 1.5MB/3.0MB (50%), 1.5MB/s, 1s\n"
    terminal = Terminal()
    with Progress(3_000_000, desc="prepare-data", unit="B", unit_scale=True, stream=terminal, mininterval=0) as bar:
        bar.update(1_500_000)
    assert "1.50MB/3.00MB" in terminal.getvalue(), terminal.getvalue()


def test_prepare_data_counts_text_bytes_against_text_bytes(tmp_path):
    """A compressed input's size on disk is not its text's: the total is then unknown, not a smaller number."""
    import gzip

    from bertkit.data.prepare import text_bytes

    plain = tmp_path / "a.txt"
    plain.write_text("some text\n" * 100)
    packed = tmp_path / "b.txt.gz"
    packed.write_bytes(gzip.compress(b"some text\n" * 100))
    assert text_bytes([plain]) == 1000
    assert text_bytes([plain, packed]) is None
