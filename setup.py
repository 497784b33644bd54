"""rmqproxy's build: setup.cfg, plus one step every install runs: generating the gRPC wire stubs
(``rmqproxy/grpc_wire``) from their ``.proto`` with grpcio-tools. An editable install writes them
beside the ``.proto`` in the source tree (git ignores them), any other build into its build tree."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROTOS = ("rmqproxy/grpc_wire/messaging.proto",)


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


setup(cmdclass={"build_py": BuildPyWithStubs})
