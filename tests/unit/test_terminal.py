"""The terminal's catch-up progress: a bar on a TTY that log lines never run into."""

import io
import logging

from streaming.run.terminal import CLEAR_LINE, Terminal, progress_bar

PROGRESS = {"medallion": {"lag": 700_000, "backlog": 1_000_000, "done": 300_000, "rate": 24_500.0, "eta_s": 28.6}}


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_says_how_far_along_how_fast_and_how_long_is_left():
    bar = progress_bar(PROGRESS, width=10)
    assert bar == ("catching up medallion [###.......] 300,000 of 1,000,000 records (30%) at 24,500/s, "
                   "about 29 s left")


def test_a_log_line_clears_the_bar_and_the_bar_comes_back_below_it():
    tty = FakeTty()
    terminal = Terminal(tty)
    logger = logging.getLogger("test-terminal")
    logger.addHandler(terminal.handler())
    logger.propagate = False
    try:
        terminal.show_bar("catching up [##..]")
        logger.warning("a line")
        terminal.clear_bar()
    finally:
        logger.handlers.clear()
    assert tty.getvalue() == f"{CLEAR_LINE}catching up [##..]{CLEAR_LINE}a line\ncatching up [##..]{CLEAR_LINE}"
    assert terminal.is_tty and not Terminal(io.StringIO()).is_tty
