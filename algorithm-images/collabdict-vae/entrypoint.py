"""Entrypoint of an algorithm image: run the task runtime for this image's algorithm only, under the
numeric profile the image declares."""

import json
import sys
from pathlib import Path

from algorithms import task_command

HERE = Path(__file__).resolve().parent
DECLARED = json.loads((HERE / "image.json").read_text())

if __name__ == "__main__":
    sys.exit(
        task_command.main(
            sys.argv[1:],
            only_algorithm=DECLARED["algorithm"],
            numeric_profile=DECLARED["numeric_profile"],
        )
    )
