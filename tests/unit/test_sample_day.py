"""The sample trading day shipped with the loader: reproducible, and as the README describes it (pure)."""

from streaming.simulation.sample_day import DEFAULT_DIR as SAMPLE_DAY
from streaming.simulation.sample_day import summary, trading_day


def test_the_sample_day_is_reproducible_and_holds_what_the_readme_says():
    files = trading_day()
    assert sorted(files) == sorted(p.name for p in SAMPLE_DAY.iterdir())
    for name, lines in files.items():
        assert (SAMPLE_DAY / name).read_text() == "".join(f"{x}\n" for x in lines), f"regenerate {name}"
    day = summary(files)
    assert day["lines"] == 364 and day["valid_trades"] == 360
    assert day["by_channel"]["mobile"] == 106
