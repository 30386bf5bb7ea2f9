"""The exercise tests' parametrization: ``wrong`` runs over a test class's typical wrong answers."""


def pytest_generate_tests(metafunc):
    if "wrong" in metafunc.fixturenames:
        wrong = metafunc.cls.WRONG
        metafunc.parametrize("wrong", wrong, ids=[fn.__name__ for fn, _ in wrong])
