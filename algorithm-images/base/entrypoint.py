"""Entrypoint of every algorithm image (executor.images.recipe puts it beside the folder's files):
run the task runtime for the algorithm its image.json names only, under the numeric profile the image
declares."""

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
