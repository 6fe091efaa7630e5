"""The course notebooks (02-06) with their "your turn" cells answered: with the reference
answers every checker says "correct"; with the wrong ones every checker raises WrongAnswer.
(The notebooks as stored, with placeholders, run in tests/notebooks/test_notebooks.py.)"""

from __future__ import annotations

import pathlib

import nbformat
import pytest
from answers import ANSWERS
from nbclient import NotebookClient

FOLDER = pathlib.Path(__file__).parents[2] / "notebooks"
NOTEBOOKS = sorted(path for path in FOLDER.glob("*.ipynb") if not path.name.startswith("01_"))


def answer_cells(notebook) -> list[tuple[int, str]]:
    """(index, exercise name) of each cell tagged ``answer:<name>``."""
    return [(index, tag.split(":", 1)[1]) for index, cell in enumerate(notebook.cells)
            for tag in cell.get("metadata", {}).get("tags", []) if tag.startswith("answer:")]


def next_code_cell(notebook, index: int):
    return next(cell for cell in notebook.cells[index + 1:] if cell.cell_type == "code")


def run(path, which: int, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    cells = answer_cells(notebook)
    for index, name in cells:
        notebook.cells[index].source = ANSWERS[name][1 + which]
    NotebookClient(notebook, timeout=60, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return notebook, cells


def errors(cell) -> list:
    return [output for output in cell.get("outputs", []) if output.get("output_type") == "error"]


def text(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream")


def test_every_exercise_is_in_exactly_one_notebook():
    names = [name for path in NOTEBOOKS
             for _, name in answer_cells(nbformat.read(path, as_version=4))]
    assert sorted(names) == sorted(ANSWERS), names


def test_answer_cells_hold_a_placeholder_and_are_followed_by_their_check():
    """As stored, each answer cell leaves ``...`` for the learner (and no answer), and the next
    code cell calls a checker of ``gradviz.course``."""
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        for index, name in answer_cells(notebook):
            source = notebook.cells[index].source
            assert "..." in source and "YOUR ANSWER" in source, (path.name, name, source)
            assert "course.check_" in next_code_cell(notebook, index).source, (path.name, name)


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_reference_answers_pass_every_check(path, tmp_path):
    notebook, cells = run(path, 0, tmp_path)
    assert cells, f"{path.name} has no exercise"
    failed = [(index, errors(cell)) for index, cell in enumerate(notebook.cells) if errors(cell)]
    assert not failed, failed
    for index, name in cells:
        said = text(next_code_cell(notebook, index))
        assert said.startswith("correct"), (name, said)


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def test_wrong_answers_fail_every_check(path, tmp_path):
    notebook, cells = run(path, 1, tmp_path)
    for index, name in cells:
        raised = errors(next_code_cell(notebook, index))
        assert [error["ename"] for error in raised] == ["WrongAnswer"], (name, raised)
