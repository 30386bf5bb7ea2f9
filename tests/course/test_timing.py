"""The timing rule (labkit.course.timing) on small synthetic notebooks, and the workshop plans."""
import json

from types import SimpleNamespace

import pytest

from labkit.course import timing as tm
from labkit.course.timing import Parts, notebook_time, plan, plan_markdown, round_up, stated_time

HAS_NOTEBOOKS = tm.NOTEBOOKS.is_dir()


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text, *outputs):
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": list(outputs), "execution_count": 1}


def stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def result(data, kind="execute_result"):
    return {"output_type": kind, "data": data, "metadata": {}}


def words(n, word="credit"):
    return " ".join([word] * n)


def write(folder, name, cells):
    path = folder / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_count_words_counts_words_and_numbers_not_rules():
    assert tm.count_words("GRPO's cosine is 0.653 at T = 30") == 7   # "=" is no word
    assert tm.count_words("| a | b |\n|---|---|\n=====\n`x`") == 3


def test_prose_words_are_read_at_the_prose_pace():
    p = Parts(prose_words=tm.PROSE_WPM * 3)
    assert p.minutes == pytest.approx(3.0)


def test_parts_add_up_with_their_constants():
    p = Parts(1, 2, 3, 4, 5, 2, 25.0) + Parts(1, 0, 0, 0, 0, 0, 0.0)
    assert p == Parts(2, 2, 3, 4, 5, 2, 25.0)
    # the exercises count by the minutes of their kinds (here one implement and one find-the-bug)
    expected = (2 / tm.PROSE_WPM + 2 / tm.OUTPUT_WPM + 3 / tm.CODE_WPM + 4 * tm.CHART_MIN
                + 5 * tm.PREDICTION_MIN + 25.0)
    assert p.minutes == pytest.approx(expected)


def test_round_up_to_five_minutes():
    assert [round_up(x) for x in (0, 0.1, 5, 5.01, 12.5)] == [0, 5, 5, 10, 15]


def test_markdown_prose_without_comments(tmp_path):
    path = write(tmp_path, "01_x.ipynb", [md("# 01 · A title\n<!-- a note for editors, not read -->\n" + words(10))])
    t = notebook_time(path)
    assert t.core_parts.prose_words == 3 + 10
    assert (t.notebook, t.title) == ("01", "A title")


def test_outputs_text_charts_and_widgets(tmp_path):
    cells = [code("print(x)",
                  stream("0.25 0.50\n"),
                  result({"text/plain": "a b c"}),
                  result({"text/markdown": "one two <!-- hidden -->", "text/plain": "<Markdown object>"},
                         "display_data"),
                  result({"image/png": "iVBOR", "text/plain": tm.PLACEHOLDERS[0]}),
                  result({"application/vnd.jupyter.widget-view+json": {}, "text/plain": "Dashboard(...)"}),
                  result({"text/plain": tm.PLACEHOLDERS[1]}),
                  {"output_type": "error", "ename": "E", "evalue": "v", "traceback": []})]
    parts = notebook_time(write(tmp_path, "02_x.ipynb", cells)).core_parts
    assert parts.output_words == 2 + 3 + 2
    assert parts.charts == 3
    assert parts.code_words == 1


def test_predictions_and_exercise_are_counted(tmp_path):
    cells = [md("**Predict, then move.**\n* a\n* b"), code("predict(...)"),
             md("<!-- exercise 01a -->\n## Exercise: write it"), code("check(f, 1)", stream(words(24)))]
    t = notebook_time(write(tmp_path, "03_x.ipynb", cells))
    assert (t.core_parts.predictions, t.core_parts.exercises) == (1, 1)
    exercise = Parts(prose_words=3, code_words=3, output_words=24, exercises=1,
                     exercise_minutes=tm.EXERCISE_MINUTES["implement"])
    assert t.exercise == round_up(exercise.minutes) == t.exercises["01a"]
    assert t.core == round_up(t.core_parts.minutes + tm.COMPUTE_MIN)


def test_deep_dive_markers_split_core_and_optional(tmp_path):
    cells = [md("# 04 · Title\n" + words(118)),                                        # core: 120 words
             md("<!-- deep-dive -->\n## Noise sweep (optional)\n" + words(602)),      # 605 words
             code("x", result({"image/png": "iVBOR"})),                                # a chart
             md("<!-- core -->\n## Back on the path\n" + words(236)),                  # core: 240 words
             md("<!-- deep-dive -->\n## Beyond (optional)\n" + words(238)),            # 240 words
             md("<!-- exercise 01a -->\n## Exercise: one function"),                   # a core one ends the deep dive
             md("text after the exercise, core")]
    t = notebook_time(write(tmp_path, "04_x.ipynb", cells))
    assert t.core_parts == Parts(prose_words=120 + 240 + 3 + 5, exercises=1, exercise_minutes=15.0)
    assert t.optional_parts == Parts(prose_words=605 + 240, code_words=1, charts=1)
    assert t.sections == {"Noise sweep": round_up(605 / tm.PROSE_WPM + 1 / tm.CODE_WPM + tm.CHART_MIN),
                          "Beyond": 5}
    assert t.core == round_up(t.core_parts.minutes + tm.COMPUTE_MIN) == 20
    assert t.optional == round_up(t.optional_parts.minutes) == 10
    assert t.total == t.core + t.optional


def test_a_marker_counts_only_at_the_start_of_a_markdown_cell(tmp_path):
    cells = [md("Some text first\n<!-- deep-dive -->\n## Not a deep dive"), code("# <!-- deep-dive -->"),
             md("\n<!-- deep-dive -->\n## Really one")]
    t = notebook_time(write(tmp_path, "05_x.ipynb", cells))
    assert list(t.sections) == ["Really one"] and t.core_parts.prose_words == 7


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match="^path:"):
        notebook_time(tmp_path / "missing.ipynb")
    with pytest.raises(TypeError, match="^path:"):
        notebook_time(3)
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(ValueError, match="^path:"):
        notebook_time(tmp_path / "bad.ipynb")
    (tmp_path / "nocells.ipynb").write_text("{}")
    with pytest.raises(ValueError, match="^path:.*cells"):
        notebook_time(tmp_path / "nocells.ipynb")
    twice = write(tmp_path, "06_x.ipynb", [md("<!-- deep-dive -->\n## A"), md("<!-- deep-dive -->\n## A")])
    with pytest.raises(ValueError, match="^path:.*two deep dives"):
        notebook_time(twice)
    with pytest.raises(FileNotFoundError, match="^folder:"):
        tm.course_times(tmp_path / "empty")


def test_stated_time_reads_both_forms(tmp_path):
    new = write(tmp_path, "01_a.ipynb", [md("# 01 · A"), md("Time: about 70 minutes (core path 50 minutes; "
                                                               "deep dives 20 minutes).")])
    old = write(tmp_path, "02_b.ipynb", [md("# 02 · B\n\nTime: about 40 minutes.")])
    assert stated_time(new) == (50, 20) and stated_time(old) == (40, 0)
    wrong = write(tmp_path, "03_c.ipynb", [md("Time: about 60 minutes (core path 50 minutes; deep dives 20 minutes).")])
    with pytest.raises(ValueError, match="^path:.*60"):
        stated_time(wrong)
    late = write(tmp_path, "04_d.ipynb", [md("a"), md("b"), md("c"), md("Time: about 5 minutes.")])
    with pytest.raises(ValueError, match="^path:.*first three"):
        stated_time(late)


def test_time_line_is_read_back_as_the_rules_time(tmp_path):
    # the line itself adds a few words: the rule's minutes stay put at these sizes
    for cells in ([md(words(500))], [md(words(50)), md("<!-- deep-dive -->\n## D\n" + words(900))]):
        t = notebook_time(write(tmp_path, "01_t.ipynb", cells))
        path = write(tmp_path, "01_t.ipynb", [md("# 01 · T\n\n" + tm.time_line(t))] + cells)
        assert stated_time(path) == (t.core, t.optional) == astuple(notebook_time(path))


def astuple(t):
    return t.core, t.optional


@pytest.fixture
def course(tmp_path):
    """Two synthetic notebooks (the first with a deep dive) and a plans CSV for both plan names."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    # core: 1203 words (10 min) + the exercise (15) + compute (0.5): 30; the deep dive: 600 words, 5
    write(folder, "01_a.ipynb", [md("# 01 · First\n" + words(1200)), md("<!-- exercise 01a -->\n## Exercise"),
                                 md("<!-- deep-dive -->\n## Extra (optional)\n" + words(598))])
    write(folder, "02_b.ipynb", [md("# 02 · Second\n" + words(2400))])   # 20 min + compute: 25
    plans = tmp_path / "plans.csv"
    plans.write_text("plan,order,notebook,what,break_after,note\n"
                     "three-hour,1,01,core,10,first\n"
                     "three-hour,2,01,Extra,0,its deep dive\n"
                     "three-hour,3,02,core,0,\n"
                     "full-day,1,02,all,60,lunch follows\n"
                     "full-day,2,01,exercise-only,0,\n")
    return folder, plans


def test_plan_computes_clock_times_from_the_rules_minutes(course):
    folder, plans = course
    table = plan("three-hour", folder=folder, plans=plans)
    a = notebook_time(folder / "01_a.ipynb")
    assert a.core == 30 and a.sections == {"Extra": 5} and a.exercise == 20
    assert list(table.columns) == ["start", "end", "notebook", "title", "part", "minutes", "note"]
    assert table.start.tolist() == ["09:00", "09:30", "09:40", "09:45"]
    assert table.end.tolist() == ["09:30", "09:40", "09:45", "10:10"]
    assert table.part.tolist() == ["core", "break", "Extra", "core"]
    assert table.title.tolist()[1] == "Break"
    day = plan("full-day", folder=folder, plans=plans)
    assert day.title.tolist() == ["Second", "Lunch", "First"] and day.minutes.tolist() == [25, 60, 20]


def test_plan_markdown_renders_the_table(course):
    folder, plans = course
    page = plan_markdown("full-day", folder=folder, plans=plans)
    assert page.startswith("# Full-day workshop")
    assert "| 09:25 | 10:25 | **Lunch** |" in page and "| 10:25 | 10:45 | 01 · First | exercise-only | 20 |" in page
    page = plan_markdown("three-hour", folder=folder, plans=plans)
    assert "Not in this plan" not in page


# (plan asked for, the CSV's rows, what the error must say)
BAD_PLANS = [
    ("three-hour", ["three-hour,1,02,core,160,"], "^name:.*more than its 180"),
    ("three-hour", ["three-hour,1,07,core,0,"], "no notebook 07"),
    ("three-hour", ["three-hour,1,01,Missing,0,"], "part 'Missing'"),
    ("three-hour", ["three-hour,1,02,exercise-only,0,"], "no exercise"),
    ("full-day", ["three-hour,1,02,core,0,"], "no rows"),
    ("full-day", ["half-day,1,02,core,0,"], "plan: must be one of"),
    ("full-day", ["full-day,1,2,core,0,"], "notebook: expected two digits"),
    ("full-day", ["full-day,1,02,core,5.5,"], "break_after: expected whole"),
    ("full-day", ["full-day,1,02,core,0,", "full-day,1,01,core,0,"], "repeats order 1"),
]


def test_plan_errors_name_what_is_wrong(course, tmp_path):
    folder, plans = course
    with pytest.raises(ValueError, match="^name:"):
        plan("two-hour", folder=folder, plans=plans)

    for name, rows, match in BAD_PLANS:
        path = tmp_path / "p.csv"
        path.write_text("plan,order,notebook,what,break_after,note\n" + "\n".join(rows) + "\n")
        with pytest.raises(ValueError, match=match):
            plan(name, folder=folder, plans=path)
    short = tmp_path / "short.csv"
    short.write_text("plan,order\nthree-hour,1\n")
    with pytest.raises(ValueError, match="^path:.*columns"):
        tm.read_plans(short)


# The shipped plans, on the shipped notebooks

needs_notebooks = pytest.mark.skipif(not HAS_NOTEBOOKS, reason="the notebooks are not next to labkit (an installed copy)")


@needs_notebooks
@pytest.mark.parametrize("name", tm.PLAN_NAMES)
def test_every_plan_fits_its_length(name):
    table = plan(name)
    _, length, start = tm.PLAN_SETTINGS[name]
    assert table.start.iloc[0] == start
    assert table.minutes.sum() <= length
    assert table.part.iloc[-1] != "break", "a plan ends with a block, not a break"
    page = plan_markdown(name)
    assert page.count("\n| ") == len(table) + 1


@needs_notebooks
def test_every_plan_row_names_an_existing_notebook_and_part():
    paths = {p.stem[:2]: p for p in tm.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    rows = tm.read_plans()
    assert set(rows.plan) == set(tm.PLAN_NAMES)
    for row in rows.itertuples():
        assert row.notebook in paths, f"{row.plan} order {row.order}: no notebook {row.notebook}"
        t = notebook_time(paths[row.notebook])
        assert row.what in tm.PARTS or row.what in t.sections, \
            f"{row.plan} order {row.order}: {row.what!r} is not a part of notebook {row.notebook}"
        assert row.note.strip(), f"{row.plan} order {row.order}: say what the block covers or skips"


@needs_notebooks
def test_the_full_day_holds_six_and_a_half_to_seven_and_a_half_hours_and_a_lunch():
    table = plan("full-day")
    content = table.loc[table.part != "break", "minutes"].sum()
    assert 390 <= content <= 450
    assert (table.title == "Lunch").sum() == 1


@needs_notebooks
def test_course_times_has_a_row_per_notebook():
    times = tm.course_times()
    assert len(times) == len(list(tm.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
    assert {"notebook", "title", "core", "optional", "total"} <= set(times.columns)
    assert (times.total == times.core + times.optional).all() and (times.core % tm.ROUND_TO == 0).all()


@pytest.fixture
def deep_exercise(monkeypatch):
    """A registered deep-dive exercise of the find-the-bug kind, under id 99z."""
    from labkit.course.exercises import EXERCISES
    fake = SimpleNamespace(id="99z", kind="debug", path="deep dive", minutes=tm.EXERCISE_MINUTES["debug"])
    monkeypatch.setitem(EXERCISES, "99z", fake)
    return fake


def test_each_exercise_counts_the_minutes_of_its_kind_where_it_sits(tmp_path, deep_exercise):
    cells = [md("# 05 · Title"), md("<!-- exercise 01a -->\n## Exercise 01a: one function"), code("check(f, 1)"),
             md("<!-- deep-dive -->\n## More exercises"),
             md("<!-- exercise 99z -->\n## Exercise 99z: a bug\n" + words(118)), code("check(g, 2)")]
    t = notebook_time(write(tmp_path, "05_x.ipynb", cells))
    assert t.core_parts.exercise_minutes == 15.0 and t.optional_parts.exercise_minutes == 10.0
    assert t.exercises == {"01a": round_up(15 + 7 / tm.PROSE_WPM + 3 / tm.CODE_WPM),
                           "99z": round_up(10 + 121 / tm.PROSE_WPM + 3 / tm.CODE_WPM)} == {"01a": 20, "99z": 15}
    assert t.sections == {"More exercises": 15} and t.exercise == 20
    line = tm.exercise_line("99z", 15)
    assert line == "*Find the bug \u00b7 about 15 minutes \u00b7 deep dive*"
    assert tm.with_exercise_line("## Exercise 99z: a bug\ntext", line) == f"## Exercise 99z: a bug\n\n{line}\ntext"
    again = tm.with_exercise_line(f"## Exercise 99z: a bug\n\n{tm.exercise_line('99z', 5)}\ntext", line)
    assert again == f"## Exercise 99z: a bug\n\n{line}\ntext"


def test_a_deep_dive_exercise_on_the_core_path_or_an_unknown_one_is_refused(tmp_path, deep_exercise):
    on_core = write(tmp_path, "06_x.ipynb", [md("# 06 · T"), md("<!-- exercise 99z -->\n## Exercise 99z: x")])
    with pytest.raises(ValueError, match="exercise 99z is a deep dive but sits on the core path"):
        notebook_time(on_core)
    unknown = write(tmp_path, "07_x.ipynb", [md("# 07 · T"), md("<!-- exercise 98q -->\n## Exercise 98q: x")])
    with pytest.raises(ValueError, match="'98q', which is not registered"):
        notebook_time(unknown)
