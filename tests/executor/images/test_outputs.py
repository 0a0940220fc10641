"""What an image may send (issue 33 item 2; executor/images/outputs.py): the declaration, the schema
check, the size bounds and the raw-row check, each refusing with the reason; and every image of
algorithm-images/ declares its outputs."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms import codec
from executor.images.outputs import (
    DEFAULT_MAX_BYTES,
    DeclarationInvalid,
    OutputDeclaration,
    OutputRefused,
    PayloadBound,
    RawRows,
    check_outputs,
    parse,
    read,
)
from executor.images.recipe import IMAGES_DIR

F8 = {"type": "ndarray", "dtypes": ["<f8"], "ndim": [1]}
DECLARED = parse(
    {
        "outputs": {
            "message": {
                "max_bytes": 2000,
                "schema": {"type": "object", "required": ["h"], "properties": {"h": F8}},
            },
            "model": {"max_bytes": 4000, "schema": {"type": "object", "properties": {"w": F8}}},
            "raw_rows": False,
        }
    }
)
DATA = np.random.default_rng(3).normal(size=(50, 5))


def _check(outbox, model=None, declared=DECLARED, rows=RawRows.of(DATA)):
    check_outputs(
        declared, {r: codec.encode(v) for r, v in outbox.items()}, model and codec.encode(model), rows
    )


def test_outputs_that_keep_to_the_declaration_pass():
    _check({"Org2MSP": {"h": np.ones(5)}}, {"w": np.zeros(5)})
    _check({"Org2MSP": {"h": DATA.mean(axis=0)}})  # statistics of the rows are not rows


@pytest.mark.parametrize(
    "outbox,model,needle",
    [
        (
            {"Org2MSP": {"h": np.ones(5), "extra": 1}},
            None,
            "has key 'extra', which the image does not declare",
        ),
        ({"Org2MSP": {}}, None, "lacks ['h']"),
        ({"Org2MSP": {"h": np.ones(5, dtype=np.float32)}}, None, "has dtype <f4, not one of ['<f8']"),
        ({"Org2MSP": {"h": np.ones((2, 2))}}, None, "has 2 dimensions"),
        ({"Org2MSP": {"h": np.ones(400)}}, None, "over the 2000 its image declares"),
        ({}, {"w": np.ones(600)}, "model is"),
        ({}, {"w": "text"}, "model.w must be an array"),
    ],
)
def test_outputs_that_break_the_declaration_are_refused(outbox, model, needle):
    with pytest.raises(OutputRefused) as exc:
        _check(outbox, model)
    assert needle in str(exc.value)


@pytest.mark.parametrize(
    "leak",
    [
        DATA[:3],  # rows as they are
        DATA[7].copy(),  # one row
        DATA[:4].astype(np.float32),  # cast
        DATA[:4].T.copy(),  # transposed
        DATA[:4].ravel(),  # flattened
        DATA[10].tolist(),  # listed
        b"\x01\x02\x03" + DATA[11].tobytes() + b"tail",  # raw bytes at an odd offset
        DATA[12].astype("<f4").tobytes(),  # raw float32 bytes
    ],
)
def test_raw_rows_are_found_however_they_are_sent(leak):
    undeclared = OutputDeclaration()  # no declaration: no schema, but raw rows are refused all the same
    with pytest.raises(OutputRefused, match="raw feature rows of this organisation's data"):
        _check({"Org2MSP": {"payload": leak}}, declared=undeclared)
    with pytest.raises(OutputRefused, match="raw rows never leave"):
        _check({}, {"kept": [leak]}, declared=undeclared)


def test_what_the_raw_row_check_does_not_catch_and_what_an_image_may_declare():
    undeclared = OutputDeclaration()
    _check(
        {"Org2MSP": {"h": DATA[:4] * 2.0}}, declared=undeclared
    )  # transformed rows: not caught (its limit)
    _check({"Org2MSP": {"h": DATA[:4, :3]}}, declared=undeclared)  # columns dropped: not caught
    _check(
        {"Org2MSP": {"h": np.zeros(5)}}, declared=undeclared, rows=RawRows.of(np.zeros((3, 5)))
    )  # constant rows
    _check({"Org2MSP": {"h": DATA[:1]}}, declared=undeclared, rows=RawRows.of(DATA[:, :1]))  # one column
    allowed = OutputDeclaration(raw_rows=True, declared=True)
    _check({"Org2MSP": {"h": DATA}}, declared=allowed)  # an image may declare that rows leave


def test_declarations_are_checked():
    for outputs, needle in (
        ({"message": {"max_bytes": 0}}, "positive integer"),
        ({"message": {"schema": {"type": "tensor"}}}, "type must be one of"),
        ({"message": {"schema": {"type": "object", "properties": {"x": {"shape": 1}}}}}, "unknown keys"),
        ({"raw_rows": "no"}, "true or false"),
        ({"files": {}}, "must be an object of message, model, raw_rows"),
    ):
        with pytest.raises(DeclarationInvalid, match=needle):
            parse({"outputs": outputs})
    assert parse({}) == OutputDeclaration() and OutputDeclaration().message == PayloadBound(DEFAULT_MAX_BYTES)


def test_every_algorithm_image_declares_its_outputs():
    folders = sorted(p.parent for p in IMAGES_DIR.glob("*/image.json"))
    assert len(folders) == 5
    for folder in folders:
        declared = read(folder)
        assert declared.declared and not declared.raw_rows, folder.name
        assert declared.message.schema is not None and declared.model.schema is not None, folder.name
        assert declared.message.max_bytes < DEFAULT_MAX_BYTES, folder.name
