"""What each runtime needs on the machine, checked before use.

A runtime whose tool is missing raises :class:`ToolMissing` (a :class:`RuntimeUnavailable`) that
names the tool and how to install it, before any task starts: never a ``PermissionError: ''``
from running an empty command. ``scripts/setup`` installs every tool listed here (docs/setup.md).
"""

from __future__ import annotations

import os
import shutil

from executor.errors import RuntimeUnavailable


class ToolMissing(RuntimeUnavailable):
    """A program a runtime needs is not installed."""

    code = "TOOL_MISSING"

    def __init__(self, tool: str, package: str, needed_for: str):
        self.tool, self.package, self.needed_for = tool, package, needed_for
        super().__init__(
            f"{needed_for} needs {tool}, which is not installed: run scripts/setup "
            f"(or, as root: apt-get install {package})"
        )


def find_tool(tool: str, package: str, needed_for: str, path: str | None = None) -> str:
    """The executable ``path`` (or ``tool`` found on PATH); :class:`ToolMissing` if there is none."""
    found = path or shutil.which(tool)
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ToolMissing(tool, package, needed_for)
    return found
