"""The README's commands, read from the README itself: the tests run what a newcomer copies."""

from __future__ import annotations

import re

from tests.support.process import REPO

README = REPO / "README.md"
_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def section(heading: str) -> str:
    """The text under `## heading`, up to the next `## `."""
    text = README.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def commands(heading: str) -> list[str]:
    """Each command line of the section's bash blocks, in order, its trailing comment dropped."""
    lines = []
    for block in _BLOCK.findall(section(heading)):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def run_command() -> str:
    return commands("Run it")[0]


def the_test_command() -> str:
    return commands("Test it")[0]
