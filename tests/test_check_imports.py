"""tools/check_imports.py: the CI check that the package's modules import each other in no circle.

Each test writes a tiny package and runs the tool as CI does (a subprocess, its exit code and
its lines), so a checker that stopped seeing circles would fail here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "check_imports.py"


def write_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "toypkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)], check=False, capture_output=True, text=True, timeout=60
    )


ACYCLIC = {
    "a.py": "from . import b\nfrom .sub import c\n",
    "b.py": "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
    "sub/__init__.py": "from .c import X\n",
    "sub/c.py": "from ..b import os\nfrom . import X as Y  # the package re-exporting its own module: not a circle\nX = 1\n",
}


def test_acyclic_package_passes(tmp_path: Path) -> None:
    result = run(write_package(tmp_path, ACYCLIC))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 modules, 0 circle(s)" in result.stdout


def test_circle_fails_with_its_path(tmp_path: Path) -> None:
    # c imports a only inside a function: still a circle (a -> sub.c -> a); the package sub,
    # which c and its own __init__ tie together, is inside it too.
    files = {**ACYCLIC, "sub/c.py": ACYCLIC["sub/c.py"] + "def f():\n    from .. import a\n"}
    result = run(write_package(tmp_path, files))
    assert result.returncode == 1
    assert "import circle (3 modules): toypkg.a -> toypkg.sub.c -> toypkg.a\n" in result.stdout
    assert "1 circle(s), 0 allowed, 1 not allowed" in result.stdout


def test_allow_list_passes_known_circles_and_refuses_new_and_stale(tmp_path: Path) -> None:
    files = {
        "a.py": "from .b import x\n",
        "b.py": "from . import a\nx = 1\n",
        "c.py": "from . import a\n",
        "d.py": "from . import e\n",
        "e.py": "import toypkg.d\n",
        "sub/__init__.py": "from .c import X\n",
        "sub/c.py": "from . import X as Y\nX = 1\n",
    }
    pkg = write_package(tmp_path, files)
    allow = tmp_path / "allowed.txt"
    allow.write_text("# today's circles\ntoypkg.a, toypkg.b\n")
    result = run(pkg, "--allow", allow)
    assert result.returncode == 1
    assert "toypkg.d -> toypkg.e -> toypkg.d" in result.stdout and "toypkg.a ->" not in result.stdout
    allow.write_text(
        "toypkg.a toypkg.b\ntoypkg.d, toypkg.e, toypkg.c  # a wider line covers a smaller circle\n"
    )
    assert run(pkg, "--allow", allow).returncode == 0
    allow.write_text("toypkg.a, toypkg.b\ntoypkg.d, toypkg.e\ntoypkg.sub, toypkg.sub.c\n")
    result = run(pkg, "--allow", allow)
    assert result.returncode == 1
    assert (
        "stale allow-list entry (no circle left in it; delete the line): toypkg.sub, toypkg.sub.c"
        in result.stdout
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [({"a.py": "def broken(:\n"}, "a.py"), (None, "is not a package")],
)
def test_bad_input_is_one_line_not_a_traceback(
    tmp_path: Path, files: dict[str, str] | None, message: str
) -> None:
    pkg = write_package(tmp_path, files) if files else tmp_path
    result = run(pkg)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


LAYERS = """\
unit core toypkg
unit dialect toypkg.dialect   # the longest prefix wins: toypkg.dialect.x is dialect's
unit fam toypkg.fam toypkg.famextra
core ->
dialect -> core
fam -> core dialect
allow toypkg.fam -> toypkg.dialect   # allowed anyway: stale
"""


def test_layers_report_each_forbidden_import_with_its_line_and_stale_exceptions(tmp_path: Path) -> None:
    files = {
        "tasks.py": "X = 1\n",
        "runner.py": "from . import tasks\n\ndef f():\n    from .dialect import x  # core -> plug-in\n",
        "dialect/__init__.py": "",
        "dialect/x.py": "from ..tasks import X\nfrom ..famextra import Y  # dialect -> family\n",
        "fam.py": "from . import dialect\nfrom .dialect import x\n",
        "famextra.py": "Y = 2\n",
    }
    pkg = write_package(tmp_path, files)
    layers = tmp_path / "layers.txt"
    layers.write_text(LAYERS)
    result = run(pkg, "--layers", layers)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[:3] == [
        "layer violation: toypkg.dialect.x -> toypkg.famextra (dialect -> fam; dialect may import core)"
        " at toypkg/dialect/x.py:2",
        "layer violation: toypkg.runner -> toypkg.dialect.x (core -> dialect; core may import nothing else)"
        " at toypkg/runner.py:4",
        "stale layer exception (import gone or allowed; delete the line): allow toypkg.fam -> toypkg.dialect",
    ]
    assert "layers: 2 violation(s), 1 stale exception(s)" in result.stdout
    layers.write_text(
        LAYERS.replace("allow toypkg.fam -> toypkg.dialect", "allow toypkg.dialect.x -> toypkg.famextra")
        + "allow toypkg.runner -> toypkg.dialect.x\n"
    )
    assert run(pkg, "--layers", layers).returncode == 0
    layers.write_text(LAYERS + "fam -> core\n")
    result = run(pkg, "--layers", layers)
    assert result.returncode == 2 and "layers.txt:8: not a unit, rule or allow line" in result.stderr


def test_the_package_keeps_its_layers() -> None:
    root = TOOL.parent.parent
    result = run(root / "pytest_plsqlbench", "--layers", root / "docs" / "layers.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 circle(s)" in result.stdout and "layers: 0 violation(s), 0 stale" in result.stdout
