"""An import-linter contract type: no module uses a private name (``_x``) of another module.

import-linter's own ``private_modules`` contract covers private *modules*; this one covers private
*names*: ``from orchestrl.a import _helper`` and ``a._helper`` (``a`` an imported module of the
package) are both reported, with the file and line. A module's own private names, dunder names and
names of other packages (RLlib's, MLflow's) are not this contract's business.

Configured in pyproject.toml (``[tool.importlinter]``)::

    contract_types = ["private_names: tools.private_names.PrivateNamesContract"]

    [[tool.importlinter.contracts]]
    name = "No module uses another module's private names"
    type = "private_names"
    packages = ["orchestrl"]
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    name: str

    def describe(self) -> str:
        return f"{self.module}:{self.line} uses the private name {self.name}"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_file(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None


def absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def violations_in(module: str, graph: ImportGraph, packages: tuple[str, ...]) -> list[Violation]:
    path = module_file(module)
    if path is None:
        return []
    tree = ast.parse(path.read_text(), filename=str(path))
    ours = tuple(f"{p}." for p in packages) + packages
    aliases: dict[str, str] = {}
    found: list[Violation] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = absolute(module, node, path.name == "__init__.py")
            if not source.startswith(ours):
                continue
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if target in graph.modules:
                    aliases[alias.asname or alias.name] = target
                elif is_private(alias.name) and source != module:
                    found.append(Violation(module, node.lineno, target))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(ours) and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and aliases[node.value.id] != module
            and is_private(node.attr)
        ):
            found.append(Violation(module, node.lineno, f"{aliases[node.value.id]}.{node.attr}"))
    return found


class PrivateNamesContract(Contract):
    """Fails when any module of ``packages`` uses a private name of another module."""

    type_name = "private_names"
    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        packages = tuple(str(p) for p in self.packages)  # type: ignore[attr-defined]
        modules = sorted(m for m in graph.modules if m.startswith(packages))
        found = [v for m in modules for v in violations_in(m, graph, packages)]
        return ContractCheck(kept=not found, metadata={"violations": [v.describe() for v in found]})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["violations"]:
            output.print_error(line, bold=False)
            output.new_line()
