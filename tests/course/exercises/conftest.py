"""The exercise tests' parametrization: ``wrong`` runs over a test class's typical wrong answers,
``edge_wrong`` over those right on the main cases and wrong on an edge case."""


def pytest_generate_tests(metafunc):
    for name, attr in (("wrong", "WRONG"), ("edge_wrong", "EDGE_WRONG")):
        if name in metafunc.fixturenames:
            answers = getattr(metafunc.cls, attr)
            metafunc.parametrize(name, answers, ids=[fn.__name__ for fn, _ in answers])
