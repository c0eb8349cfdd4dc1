"""Ship the top-level templates/, runtime_c/ and boards/ inside the wheel as codegen/_data/.

The source tree keeps them at the top level (the project's fixed layout); codegen.resources finds
them in either place.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_DIRS = ("templates", "runtime_c", "boards")


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).parent
        for name in DATA_DIRS:
            src = root / name
            dst = Path(self.build_lib) / "codegen" / "_data" / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
