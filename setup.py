"""Build script: compiles the optional Cython core ``rlx_ref._core``.

If Cython or a C compiler is missing, or the build fails, the package installs without
it and ``rlx_ref.hotpaths`` falls back to the pure-Python twin ``rlx_ref._core_py``.
"""
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build extensions, but never fail the install because of them."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any build failure means "pure Python"
            print(f"rlx_ref: Cython core not built ({e}); using pure Python", file=sys.stderr)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            print(f"rlx_ref: could not build {ext.name} ({e}); using pure Python",
                  file=sys.stderr)


def extensions():
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("rlx_ref: Cython not available; installing pure Python", file=sys.stderr)
        return []
    return cythonize(["rlx_ref/_core.pyx"], language_level=3, quiet=True)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
