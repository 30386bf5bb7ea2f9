"""labkit.course.predict: a guess is locked before the answer shows, the verdict says how close it
was, and the stored forms (text, collapsed HTML) never depend on a guess."""
import pytest

from labkit.course.predict import Prediction, guesses, predict


def test_a_numeric_guess_gets_a_verdict_on_the_range():
    p = predict("How large?", 0.30, low=0.0, high=1.0, reveal="* it is 0.30 at T = 200")
    assert p.guess is None
    assert "spot on" in p.lock(0.32)          # 2 % of the range
    q = predict("How large?", 0.30, low=0.0, high=1.0)
    assert "close" in q.lock(0.40) and "off by 0.100" in q.verdict()
    r = predict("How large?", 0.30, low=0.0, high=1.0)
    assert "far off" in r.lock(0.9)


def test_a_choice_is_right_or_not():
    p = predict("Which leads?", "CCPO", choices=["GRPO", "CCPO", "C3"])
    assert p.lock("CCPO") == "You picked CCPO: right."
    q = predict("Which leads?", "CCPO", choices=["GRPO", "CCPO", "C3"])
    assert "the answer is CCPO" in q.lock("GRPO")


def test_one_guess_per_block_and_only_a_valid_one():
    p = predict("n?", 12, low=0, high=100)
    with pytest.raises(ValueError, match="guess: must lie in"):
        p.lock(120)
    with pytest.raises(ValueError, match="guess: must be a finite number"):
        p.lock(float("nan"))
    p.lock(10)
    with pytest.raises(RuntimeError, match="already locked"):
        p.lock(11)
    with pytest.raises(ValueError, match="guess: must be one of"):
        predict("c?", "a", choices=["a", "b"]).lock("z")


def test_stored_forms_show_the_answer_and_no_guess():
    p = predict("How large?", 0.3021, low=0.0, high=1.0, reveal="* first finding\n* second finding")
    bundle = p._repr_mimebundle_()
    assert bundle["text/plain"] == "Predict: How large?\nAnswer: 0.302\n* first finding\n* second finding"
    assert "<details" in bundle["text/html"] and "<details open" not in bundle["text/html"]
    assert "<li>second finding</li>" in bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    before = dict(bundle)
    p.lock(0.9)
    after = p._repr_mimebundle_()
    assert after["text/plain"] == before["text/plain"] and after["text/html"] == before["text/html"]


def test_the_widget_locks_and_reveals():
    p = predict("n?", 40, low=0, high=100)
    box = p.widget
    control, button = box.children[1].children
    control.value = 37
    button.click()
    assert p.guess == 37 and control.disabled and button.disabled
    assert "spot on" in box.children[2].outputs[0]["data"]["text/html"]
    assert guesses().iloc[-1].guess == 37


@pytest.mark.parametrize("kw, match", [
    (dict(question="", answer=1, low=0, high=2), "question:"),
    (dict(question="q", answer=1), "low:"),
    (dict(question="q", answer=3, low=0, high=2), "answer: 3 lies outside"),
    (dict(question="q", answer=1, low=2, high=0), "high:"),
    (dict(question="q", answer=float("inf"), low=0, high=2), "answer:"),
    (dict(question="q", answer="d", choices=["a", "b"]), "answer:"),
    (dict(question="q", answer="a", choices=["a"]), "choices:"),
    (dict(question="q", answer="a", choices=["a", "b"], low=0), "low:"),
    (dict(question="q", answer=1, low=0, high=2, decimals=9), "decimals:"),
])
def test_bad_input_names_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        predict(**kw)


def test_the_prediction_is_a_dataclass_with_no_guess_at_first():
    assert Prediction("q", 1, low=0, high=2).guess is None


def test_a_choice_widget_asks_for_a_pick_before_locking():
    p = predict("Which?", "b", choices=["a", "b"])
    box = p.widget
    control, button = box.children[1].children
    button.click()
    assert p.guess is None and "Pick an answer first" in box.children[2].outputs[0]["data"]["text/html"]
    control.value = "b"
    button.click()
    assert p.guess == "b" and "right" in box.children[2].outputs[0]["data"]["text/html"]


def test_code_spans_show_as_code_and_nothing_else_is_markup():
    p = predict("Move `noise` to <b>0.5</b>?", 1, low=0, high=2, reveal="* `horizon` 2 & more")
    page = p.html()
    assert "<code>noise</code>" in page and "&lt;b&gt;0.5&lt;/b&gt;" in page
    assert "<li><code>horizon</code> 2 &amp; more</li>" in page
