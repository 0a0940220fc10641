"""Image recipes and the pinned wheels they are built from (executor.images.recipe)."""

from __future__ import annotations

import json

import pytest

from algorithms.numeric_profile import PROFILE
from executor.errors import ImageBuildError
from executor.images.recipe import BASE_DIR, IMAGES_DIR, ImageRecipe, image_requirements, project_pins


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
    meta = {"name": "x", "version": "1", "algorithm": "a:B", "numeric_profile": PROFILE.id}
    (tmp_path / "image.json").write_text(json.dumps(meta))
    with pytest.raises(ImageBuildError, match='not an algorithm folder: its image.json names no "sdk"'):
        ImageRecipe.load(tmp_path)
    (tmp_path / "image.json").write_text(json.dumps({**meta, "sdk": "1.0.0"}))
    assert ImageRecipe.load(tmp_path).base == "python"
    (tmp_path / "Containerfile").write_text("")
    with pytest.raises(ImageBuildError, match="an algorithm folder has no Containerfile"):
        ImageRecipe.load(tmp_path)


def test_every_image_is_built_by_the_platforms_one_recipe_and_entrypoint(recipe):
    """A built-in image folder holds only its declaration and modules: the Containerfile and the
    entrypoint are the platform's, the same for built-in and user images."""
    for folder in sorted(p.parent for p in IMAGES_DIR.glob("*/image.json")):
        assert not (folder / "Containerfile").exists() and not (folder / "entrypoint.py").exists(), folder
        files = dict((d, s) for s, d in ImageRecipe.load(folder).payload_files())
        assert (
            files["image/entrypoint.py"] == BASE_DIR / "entrypoint.py"
            and "consortia_sdk/__init__.py" in files
        )
    assert ImageRecipe.named("collabdict-vae").base == "torch"  # torch: sandbox only


def test_a_user_algorithm_folder_is_a_recipe_with_the_sdk_and_the_platforms_entrypoint(tmp_path):
    from tests.support.own_algorithm import write_folder

    folder = write_folder(tmp_path, "sklearn")
    (folder / ".venv").mkdir()
    (folder / ".venv" / "junk.py").write_text("")
    user = ImageRecipe.load(folder)
    assert user.base == "python" and user.algorithm == "ridge_consensus:RidgeConsensus"
    files = dict((d, s) for s, d in user.payload_files())
    assert files["image/entrypoint.py"] == BASE_DIR / "entrypoint.py"
    assert {"consortia_sdk/__init__.py", "image/ridge_consensus.py", "image/requirements.txt"} <= set(files)
    assert not any(".venv" in d for d in files)
    assert user.containerfile().startswith((BASE_DIR / "Containerfile.algorithm").read_text().rstrip("\n"))
    assert ImageRecipe.load(write_folder(tmp_path / "t", "torch")).base == "torch"
    meta = json.loads((folder / "image.json").read_text())
    (folder / "image.json").write_text(json.dumps({**meta, "base": "jax"}))
    with pytest.raises(ImageBuildError, match="base 'jax' is not one of"):
        ImageRecipe.load(folder)
    (folder / "image.json").write_text(json.dumps(meta))
    (folder / "entrypoint.py").write_text("")
    with pytest.raises(ImageBuildError, match="an algorithm folder has no entrypoint.py"):
        ImageRecipe.load(folder)


def test_every_image_declares_the_numeric_profile_and_carries_its_environment(tmp_path, recipe):
    """image.json declares the profile; the container image's configuration carries its environment
    and label (so its digest covers them); a recipe without one, or with an unknown one, is refused."""
    for folder in sorted(p.parent for p in IMAGES_DIR.glob("*/image.json")):
        assert ImageRecipe.load(folder).numeric_profile is PROFILE, folder.name
    text = recipe.containerfile()
    assert text.startswith((BASE_DIR / "Containerfile.algorithm").read_text().rstrip("\n"))
    for name, value in PROFILE.environ().items():
        assert f"{name}={json.dumps(value)}" in text
    assert f'org.consortia.numeric_profile="{PROFILE.id}"' in text and PROFILE.digest in text
    meta = {"name": "x", "version": "1", "algorithm": "a:B", "sdk": "1.0.0"}
    (tmp_path / "image.json").write_text(json.dumps(meta))
    with pytest.raises(ImageBuildError, match="'numeric_profile' must be a non-empty string"):
        ImageRecipe.load(tmp_path)
    (tmp_path / "image.json").write_text(json.dumps({**meta, "numeric_profile": "x86-64-v4/1"}))
    with pytest.raises(ImageBuildError, match="unknown numeric profile 'x86-64-v4/1'"):
        ImageRecipe.load(tmp_path)
