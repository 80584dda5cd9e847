"""bench.month_files: the logs it builds have the layout the pipeline leaves, and it says no to
nonsense on its command line."""

import pytest

from bench import month_files


def test_a_month_without_days_keeps_every_small_file_and_with_days_only_the_open_days_ones():
    without = month_files.layout(30, 1000, partitioned=False)
    with_days = month_files.layout(30, 1000, partitioned=True)
    per_open_day = month_files.files_per_day(1000, month_files.OPEN_FILE_BYTES)
    per_closed_day = month_files.files_per_day(1000, month_files.CLOSED_FILE_BYTES)

    assert sum(n for _, n in without) == 30 * per_open_day
    assert sum(n for _, n in with_days) == 2 * per_open_day + 28 * per_closed_day
    assert 20 <= per_closed_day <= 30 and 1200 <= per_open_day <= 1300  # 6.1 GB a day of silver
    assert len({day for day, _ in with_days}) == 30 and {day for day, _ in without} == {None}


def test_the_first_hour_is_an_hour_of_files():
    assert month_files.layout(1, 1000, partitioned=True, hours=1.0) == [
        (month_files.layout(1, 1000, partitioned=True)[0][0], month_files.files_per_day(1000, 5 * 10**6, hours=1))]


@pytest.mark.parametrize("argv", [["--days", "0"], ["--rate", "-5"], ["--roll-trades", "-1"], ["--commits", "x"]])
def test_a_wrong_number_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        month_files.main(argv)
    assert stopped.value.code == 2 and "error:" in capsys.readouterr().err
