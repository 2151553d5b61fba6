"""Crash-safe writing: files and whole directories replace their target only when complete."""

import pytest

from bertkit.io import atomic_directory, atomic_write_text


def test_atomic_directory_replaces_the_old_directory_only_on_success(tmp_path):
    target = tmp_path / "final"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic_directory(target) as staging:
        (staging / "new.txt").write_text("new")
        assert (target / "old.txt").exists()  # untouched while the new one is being built
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"]  # no .tmp or .old left behind


def test_atomic_directory_keeps_the_old_directory_when_building_fails(tmp_path):
    target = tmp_path / "final"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_directory(target) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("killed mid-export")
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final"]


def test_atomic_directory_clears_a_stale_staging_directory(tmp_path):
    stale = tmp_path / "final.tmp"
    stale.mkdir()
    (stale / "leftover.txt").write_text("from a crash")
    with atomic_directory(tmp_path / "final") as staging:
        assert list(staging.iterdir()) == []
        (staging / "a.txt").write_text("a")
    assert [p.name for p in (tmp_path / "final").iterdir()] == ["a.txt"]


def test_atomic_write_text_leaves_no_temporary_file(tmp_path):
    atomic_write_text(tmp_path / "a.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
