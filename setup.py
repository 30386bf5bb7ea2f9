"""Build hook: a wheel of labkit carries the repository's data/ as labkit/_data.

Everything else is declared in pyproject.toml. The notebooks' library needs data/ (the tiny LM,
the truth caches, the inventory, the stored bands); labkit.core.paths looks for it in
labkit/_data first, so `pip install .` or `pip install git+<repo URL>` works away from a clone.
An editable install (`pip install -e .`, what `make` does) reads data/ in place instead."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = Path(__file__).resolve().parent / "data"


class build_py_with_data(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        if not DATA.is_dir():
            raise SystemExit(f"setup.py: {DATA} is missing; build labkit from a full clone of the lab")
        shutil.copytree(DATA, Path(self.build_lib) / "labkit" / "_data", dirs_exist_ok=True)


setup(cmdclass={"build_py": build_py_with_data})
