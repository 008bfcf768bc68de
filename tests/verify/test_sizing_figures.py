"""`bench.run` ends by setting its figures against docs/sizing.md's table: the table must stay
readable by it, row by cluster size."""

from __future__ import annotations

import pytest

from bench.run import SIZING, compare, previous


@pytest.mark.parametrize("nodes", [5000, 20000])
def test_every_row_of_the_sizing_table_is_read_with_all_its_figures(nodes: int) -> None:
    got = previous(nodes, SIZING.read_text())
    assert got is not None
    assert set(got) == {"cache", "rss", "swept", "sync", "p99", "sweep"}
    # A cold sync as its multiple of the floor (under 1 since the cache builds nothing for
    # the finished pods and Jobs that the floor decodes whole), not the floor's of it.
    assert 0.3 < got["sync"] < 5
    assert got["cache"] < got["rss"] <= got["swept"]


def test_a_row_is_found_by_its_size_only() -> None:
    table = (
        "| cluster | a | b | c | d | e | f |\n|---|---|---|---|---|---|---|\n"
        "| 500 / 15,000 | 12 MB | 80 MB | 90 MB | 1.0 s (0.5 s) | 2.5 ms | 0.1 s |\n"
        "| 5,000 / 150,000 | 1,127 MB | 1,197 MB | 1,258 MB | 6.0 s (2.0 s) | 3.0 ms | 0.6 s |\n"
    )
    assert previous(5000, table) == {
        "cache": 1127, "rss": 1197, "swept": 1258, "sync": 3.0, "p99": 3.0, "sweep": 0.6,
    }  # fmt: skip
    assert previous(50000, table) is None


def test_the_comparison_names_each_figure_with_its_previous_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    compare(5000, {"sync": 1.5, "cache": 100.0, "p99": 2.0})
    out = capsys.readouterr().out
    assert out.startswith("against docs/sizing.md (5,000 nodes): ")
    assert "cold sync 1.50x the floor (was " in out and "cache memory 100 MB (was " in out
    assert "warm p99, quiet 2.0 ms (was " in out  # the table's column: not the churned pass's
    compare(123, {"sync": 1.5})
    assert "no row for 123 nodes" in capsys.readouterr().out
