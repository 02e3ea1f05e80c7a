"""Re-run every `$ tmd ...` example in docs/*.md and write its current output back.

The docs tests fail when an example's output no longer matches the engine; after a deliberate
change to a message, run this and review the diff.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def run(command: str) -> str:
    args = shlex.split(command)
    result = subprocess.run(
        [sys.executable, "-m", "tmd", *args[1:]], capture_output=True, text=True
    )
    return (result.stdout + result.stderr).rstrip("\n")


def refresh(block: re.Match) -> str:
    out, lines = [], block.group(1).splitlines()
    for line in lines:
        if line.startswith("$ tmd "):
            out += [line, run(line[2:])]
    return "```console\n" + "\n".join(out) + "\n```" if out else block.group(0)


for page in sorted(DOCS.glob("*.md")):
    text = page.read_text()
    new = BLOCK.sub(refresh, text)
    if new != text:
        page.write_text(new)
        print(f"updated {page.name}")
