"""Image recipes and the pinned wheels they are built from (executor.images.recipe)."""

from __future__ import annotations

import json

import pytest

from executor.errors import ImageBuildError
from executor.images.recipe import ImageRecipe, image_requirements, project_pins


def test_image_requirements_use_the_project_pins():
    pins = project_pins()
    reqs = image_requirements()
    assert "numpy==" + pins["numpy"] in reqs and "scikit-learn==" + pins["scikit-learn"] in reqs
    assert all("==" in r for r in reqs)


def test_recipe_loads_and_validates(tmp_path, recipe):
    assert recipe.name == "average-consensus" and recipe.algorithm == "average_consensus:AverageConsensus"
    dsts = [d for _, d in recipe.payload_files()]
    assert "algorithms/task_runtime.py" in dsts and "image/entrypoint.py" in dsts
    # the image's command line and what it imports are in every image
    assert {"algorithms/task_command.py", "algorithms/task_spec.py", "wire/canonical.py"} <= set(dsts)
    assert not any("__pycache__" in d for d in dsts)
    with pytest.raises(ImageBuildError, match="no image.json"):
        ImageRecipe.load(tmp_path)
    (tmp_path / "image.json").write_text(json.dumps({"name": "x", "version": "1", "algorithm": "a:B"}))
    with pytest.raises(ImageBuildError, match="lacks Containerfile"):
        ImageRecipe.load(tmp_path)
