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
