"""Checks aifs_plan's protocol constants against the table in docs/plan.md, the protocol's one
specification (plan/plan_test.go checks the Go constants against the same table). The module is
read, not imported, so the check needs no torch.

Run: /usr/bin/python3 -m unittest discover -s python -v
"""

import ast
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "..", "docs", "plan.md")
MODULE = os.path.join(HERE, "aifs", "plan.py")


def spec_constants():
    """Returns {Python expression: value as written} for the rows of docs/plan.md's constants
    table that have a Python name."""
    with open(SPEC, encoding="utf-8") as f:
        text = f.read()
    _, _, table = text.partition("\n## Constants\n")
    table, _, _ = table.partition("\n## ")
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != 7 or cells[2].startswith("---") or cells[1] == "name":
            continue
        python = cells[4].strip("`")
        if python:
            rows[python] = cells[2].strip("`")
    return rows


def module_constants(module=MODULE):
    """Evaluates the module-level assignments of `module` (aifs_plan.py) whose values are
    constant expressions (literals and arithmetic on earlier ones)."""
    with open(module, encoding="utf-8") as f:
        tree = ast.parse(f.read(), module)
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = eval(compile(ast.Expression(node.value), module, "eval"),
                                                 {"__builtins__": {}}, dict(names))
            except Exception:
                pass  # not a constant expression
    return names


class SpecTest(unittest.TestCase):
    def test_constants_match_spec(self):
        spec = spec_constants()
        self.assertTrue(spec, "docs/plan.md has no constants with Python names")
        module = module_constants()
        for expr, want in spec.items():
            with self.subTest(expr):
                got = eval(expr, {"__builtins__": {}}, module)
                if isinstance(got, bytes):  # a header: the line and its "\n"
                    self.assertEqual(got, want.encode() + b"\n")
                elif isinstance(got, int):
                    self.assertEqual(got, int(want, 0))
                else:
                    self.assertEqual(got, want)

    def test_kernel_control_root_shared(self):
        """aifs_direct finds the kernel plane's control mounts where aifs_plan says they are."""
        direct = module_constants(os.path.join(os.path.dirname(MODULE), "direct.py"))
        self.assertEqual(direct["_KERNEL_CONTROL_ROOT"], module_constants()["_KERNEL_CONTROL_ROOT"])


if __name__ == "__main__":
    unittest.main()
