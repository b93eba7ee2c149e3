"""The import-linter contract type that keeps modules off each other's private names."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

from tools.private_names import violations_in


@pytest.fixture
def package(tmp_path: Path) -> Iterator[str]:
    """A throwaway package ``pkg`` on sys.path: ``pkg.a`` defines private and public names."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("def _helper():\n    return 1\n\n\ndef public():\n    return _helper()\n")
    sys.path.insert(0, str(tmp_path))
    yield "pkg"
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
        del sys.modules[name]


def check(package: str, module: str, source: str) -> list[str]:
    path = Path(sys.path[0]) / package / f"{module.rsplit('.', 1)[-1]}.py"
    path.write_text(source)
    graph = grimp.build_graph(package, cache_dir=None)
    return [v.describe() for v in violations_in(module, graph, (package,))]


def test_importing_a_private_name_of_another_module_is_reported(package: str) -> None:
    found = check(package, "pkg.b", "from pkg.a import _helper, public\n\nx = _helper() + public()\n")
    assert found == ["pkg.b:1 uses the private name pkg.a._helper"]


def test_reaching_into_a_module_for_a_private_name_is_reported(package: str) -> None:
    found = check(package, "pkg.c", "from pkg import a\n\nx = a._helper()\n")
    assert found == ["pkg.c:3 uses the private name pkg.a._helper"]


def test_public_names_dunders_and_a_modules_own_private_names_pass(package: str) -> None:
    source = "from pkg import a\nfrom pkg.a import public\n\n\ndef _own():\n    return a.__name__, public()\n"
    assert check(package, "pkg.d", source) == []
