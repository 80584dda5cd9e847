"""docs/cli.md is rendered from the parsers: it says every flag, default and variable the command line has."""

from pathlib import Path

from streaming.run.arguments import build_load_parser, build_parser
from streaming.run.cli import parse_load_settings, parse_settings
from streaming.run.cli_reference import REGENERATE, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_committed_page_is_what_the_parsers_render():
    assert PAGE.read_text() == render(), f"docs/cli.md differs from the parsers: regenerate it with `{REGENERATE}`"


def test_every_flag_of_both_commands_has_a_row():
    page = render()
    for parser in (build_parser(), build_load_parser()):
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert f"| `{flag}" in page, flag


def test_the_variables_the_page_names_are_the_ones_read(tmp_path):
    page = render()
    assert "| `--topic NAME` | trades | trades topic | `TRADE_SUMMARY_TOPIC` |" in page
    assert parse_settings([], {"TRADE_SUMMARY_TOPIC": "fills"}).topic == "fills"
    assert "`TRADE_SUMMARY_NO_PRODUCER` |" in page
    assert parse_settings([], {"TRADE_SUMMARY_NO_PRODUCER": "yes"}).producer_enabled is False
    assert "| `--from DIR` | required |" in page and "`TRADE_SUMMARY_FROM` |" in page
    assert parse_load_settings([], {"TRADE_SUMMARY_FROM": str(tmp_path)}).source_dir == tmp_path
