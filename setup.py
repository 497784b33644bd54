"""rmqproxy's build: setup.cfg, plus two steps every install runs.

- The gRPC wire stubs (``rmqproxy/grpc_wire``), generated from their ``.proto`` with grpcio-tools.
- The codec's optional compiled hot path, ``codec/_speedups.pyx`` through Cython (issue 40). It is
  optional: without a C compiler, or when Cython fails, the build warns and succeeds, and the codec
  runs its pure-Python twin (``codec/implementation.py`` says which one is in use).

An editable install writes both into the source tree (git ignores them), any other build into its
build tree.
"""

from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROTOS = ("rmqproxy/grpc_wire/messaging.proto",)
SPEEDUPS = Extension("codec._speedups", ["codec/_speedups.pyx"])


def generate_stubs(out: Path) -> None:
    """``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` of every proto in PROTOS, under ``out``."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    for proto in PROTOS:
        argv = ["protoc", f"-I{ROOT}", f"-I{well_known}", f"--python_out={out}", f"--pyi_out={out}",
                f"--grpc_python_out={out}", str(ROOT / proto)]  # fmt: skip
        if protoc.main(argv) != 0:
            raise SystemExit(f"protoc could not compile {proto}")


class BuildPyWithStubs(build_py):
    """``build_py`` that also generates the gRPC stubs (into the sources when editable)."""

    def run(self) -> None:
        super().run()
        generate_stubs(ROOT if self.editable_mode else Path(self.build_lib))


class OptionalBuildExt(build_ext):
    """``build_ext`` whose failure is a warning: the codec then runs its pure-Python twin. An
    editable install builds in place, so the extension lands beside ``codec/_speedups.pyx``."""

    def finalize_options(self) -> None:
        self.not_built: Exception | None = None
        self.failed: set[str] = set()
        try:  # before setuptools finalizes the extensions, so it finalizes the cythonized ones
            from Cython.Build import cythonize

            self.distribution.ext_modules = cythonize(self.distribution.ext_modules, language_level=3, quiet=True)
        except Exception as exc:  # no Cython, or the .pyx does not translate: both mean "pure path"
            self.not_built = exc
            self.distribution.ext_modules = []
        super().finalize_options()

    def run(self) -> None:
        if self.not_built is not None:
            _warn(self.not_built)
            return
        if self.editable_mode:
            self.inplace = True
        super().run()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # a compile error, or no compiler at all
            _warn(exc)
            self.failed.add(ext.name)

    def copy_extensions_to_source(self) -> None:
        """Only what was built: a failed extension has nothing to copy."""
        self.extensions = [ext for ext in self.extensions if ext.name not in self.failed]
        super().copy_extensions_to_source()


def _warn(exc: Exception) -> None:
    """Say loudly, in the install's output, that the compiled codec was not built and why."""
    print(f"\nWARNING: codec._speedups (the compiled codec) was not built: {type(exc).__name__}: {exc}\n"
          "WARNING: rmqproxy installs and runs its pure-Python codec instead (slower, same behaviour).\n",
          flush=True)  # fmt: skip


setup(ext_modules=[SPEEDUPS], cmdclass={"build_py": BuildPyWithStubs, "build_ext": OptionalBuildExt})
