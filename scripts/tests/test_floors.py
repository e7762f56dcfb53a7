"""Dependencies point down only: no crate's modules form an import circle (scripts/tests/floors.py
reads the graph; `python3 scripts/tests/floors.py channel/src` prints any circle and the imports
that tie it)."""
import os
import tempfile
import unittest

import floors

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CRATES = ["channel/src", "channel/cli/src", "iwarp/src", "iwarp/sockets/src", "reliability/src",
          "policies/src"]


def write(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


class Floors(unittest.TestCase):
    def test_no_crate_has_an_import_circle(self):
        for src in CRATES:
            mods, edges = floors.graph(os.path.join(HERE, src))
            self.assertGreater(len(mods), 1, src)
            found = [floors.describe(src, mods, edges, c) for c in floors.circles(edges)]
            self.assertEqual(found, [], f"{src} has import circles:\n" + "\n".join(found))

    def test_a_circle_is_found_through_crate_super_and_a_face(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, {
                "lib.rs": "mod a;\nmod b;\nmod top;\n",
                "a.rs": "use crate::b::{x, y::Z};\npub fn f() {}\n",
                "b/mod.rs": "mod y;\npub use y::Z;\npub fn x() {}\n",
                "b/y.rs": "// crate::a::f in a comment is no arrow\npub struct Z;\nfn g() { crate::a::f() }\n",
                "top.rs": "use crate::b::Z;\n#[cfg(test)]\nmod tests {\n use crate::top::*;\n}\n",
            })
            mods, edges = floors.graph(d)
            self.assertEqual(edges[("b", "y")], {("a",)})
            self.assertEqual(edges[("top",)], {("b", "y")}, "through the face to where Z lives")
            self.assertEqual(floors.circles(edges), [[("a",), ("b", "y")]])

    def test_a_parent_and_a_child_that_use_each_other_are_a_circle(self):
        with tempfile.TemporaryDirectory() as d:
            write(d, {"lib.rs": "mod p;\n",
                      "p/mod.rs": "mod c;\nuse c::helper;\npub struct S;\n",
                      "p/c.rs": "use super::S;\npub fn helper() {}\n"})
            mods, edges = floors.graph(d)
            self.assertEqual(floors.circles(edges), [[("p",), ("p", "c")]])


if __name__ == "__main__":
    unittest.main()
