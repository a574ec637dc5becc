#!/usr/bin/env python3
"""Checks that every #include "dir/file.h" in the C++ sources points down the layers of
DESIGN.md section 1 and docs/layout.md, and names a header that exists:

  core <- schedule <- validation, reference <- kernel <- oracle, casefile
       <- service, casegen <- harness <- cli, python, fuzz, bench, properties

(the literal programs sit below validation, whose program rules read them, and below the
tiled kernels, which run the literal schedule; the harness holds what the drivers share; the
two doors and the three drivers are leaves side by side, none including another).
A file may include its own folder and any folder of a lower level; a folder of the same level
or higher is a violation. tests/ and tools/ sit on top and are not checked. Every folder
holding C++ sources must have a level here.

The Python package's modules must import in one direction (no cycle, imports inside
functions included). It also counts the generic files (no jax_ or v3_ prefix) that include a
dialect's header: each must be a dialect registry (REGISTRIES, at most MAX_REGISTRIES) or in
NAMING_DIALECT (empty since issue 48), and each listed one must still do so.

Usage: check_layers.py REPO_ROOT      exit 1 and one line per violation
       check_layers.py --self-test    plants violations in a scratch tree, expects each found
"""
import ast
import os
import re
import sys
import tempfile

LEVELS = {
    "core": 0,
    "schedule": 1,
    "validation": 2,
    "reference": 2,
    "kernel": 3,
    "oracle": 4,
    "casefile": 4,
    "service": 5,
    # The case generator: specs, builders, materializers, mutations, spec models, profiles,
    # production calls, raw calls.
    "casegen": 5,
    # The checks the drivers share: raw calls, validation, the fuzz targets' bodies, the bench
    # workloads and production calls.
    "harness": 6,
    # The leaves, side by side: the two doors (the rpa commands, the Python package's binding)
    # and the three drivers (the fuzz targets' entry points, the benchmark binary, the
    # RapidCheck properties). None includes another.
    "cli": 7,
    "python": 7,
    "fuzz": 7,
    "bench": 7,
    "properties": 7,
}
# A file serving one dialect says which by its name's prefix; a file without one is generic.
DIALECT_PREFIXES = ("jax_", "v3_")
# The dialect registries: the files that list every dialect's entry of an interface
# (service/dialect_ops.h, casegen/dialect_generator.h, cli/dialect_commands.h,
# harness/input_families.h, python/marshal.h), the case's members (casefile/case.h), the one
# place each names them (docs/layout.md).
REGISTRIES = {
    "casefile/case.h",
    "casegen/dialect_generators.cc",
    "cli/dialect_commands.cc",
    "harness/input_families.cc",
    "python/bindings.cc",
    "service/dialect_registry.cc",
}
MAX_REGISTRIES = 6
# The generic files that still include a dialect's header, each to go through the dialect
# interface and its registry (issue 48 emptied it). A generic file that is neither listed nor a
# registry and names a dialect fails the check, and so does a listed file that no longer does:
# the list only shrinks.
NAMING_DIALECT = set()
UNCHECKED = {"tests", "tools", "build", "corpus", "scripts", ".git", ".ci"}
# "dir/file.h", and <dir/file.h> where dir is one of the project's folders.
INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)')
SOURCE = (".cc", ".h")


def is_dialect_file(path):
    return os.path.basename(path).startswith(DIALECT_PREFIXES)


def violations(root, naming_dialect=None, registries=None):
    """Every include that points up, sideways or nowhere, and every generic file naming a
    dialect that neither registries (default: REGISTRIES) nor naming_dialect (default:
    NAMING_DIALECT) lists."""
    registries = REGISTRIES if registries is None else registries
    allowed = (NAMING_DIALECT if naming_dialect is None else naming_dialect) | registries
    found = []
    if len(registries) > MAX_REGISTRIES:
        found.append(f"{len(registries)} dialect registries: at most {MAX_REGISTRIES} files may "
                     f"name every dialect (docs/layout.md)")
    naming = {}
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top in UNCHECKED:
            continue
        for dirpath, _, files in os.walk(path):
            for name in sorted(files):
                if not name.endswith(SOURCE):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if top not in LEVELS:
                    found.append(f"{rel}: folder {top}/ has no layer in DESIGN.md section 1")
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1) or m.group(2)
                        if m.group(2) and target.split("/")[0] not in LEVELS:
                            continue  # a system or library header
                        if is_dialect_file(target) and not is_dialect_file(rel):
                            naming.setdefault(rel, f"{rel}:{lineno}: includes \"{target}\"")
                        where = f"{rel}:{lineno}: includes \"{target}\""
                        folder = target.split("/")[0] if "/" in target else top
                        if not os.path.isfile(os.path.join(root, target)) and not os.path.isfile(
                                os.path.join(dirpath, target)):
                            found.append(f"{where}, which does not exist")
                        elif folder == top:
                            continue
                        elif folder not in LEVELS:
                            found.append(f"{where}: {folder}/ is not a library layer")
                        elif LEVELS[folder] >= LEVELS[top]:
                            found.append(f"{where}: {folder}/ (level {LEVELS[folder]}) is not "
                                         f"below {top}/ (level {LEVELS[top]})")
    for rel in sorted(set(naming) - allowed):
        found.append(f"{naming[rel]}, a dialect's header in a generic file: go through the "
                     f"dialect interface (docs/layout.md)")
    for rel in sorted(allowed - set(naming)):
        which = "REGISTRIES" if rel in registries else "NAMING_DIALECT"
        found.append(f"{rel}: listed in {which} but names no dialect now: take it off the list")
    return found


def python_modules(root):
    """The modules of the Python package under root/python/rpa, by dotted name."""
    mods = {}
    base = os.path.join(root, "python")
    for dirpath, _, files in os.walk(os.path.join(base, "rpa")):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                mod = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
                mods[mod[:-len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return mods


def import_cycles(root):
    """The Python package's import cycles (imports anywhere in a module, a function's
    included), one line each: the package's modules import in one direction."""
    mods = python_modules(root)
    graph = {}
    for mod, path in mods.items():
        deps = set()
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    # from rpa import _api: the module; from rpa import _rpa: the compiled one.
                    deps.add(sub if sub in mods or a.name == "_rpa" else node.module)
        graph[mod] = sorted(d for d in deps if d in mods and d != mod)
    # Tarjan's strongly connected components: a component of two or more is a cycle.
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(f"python/: an import cycle: {', '.join(sorted(component))}")

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def self_test():
    planted = {
        "kernel/a.h": '#include "oracle/b.h"\n',        # up
        "oracle/b.h": '#include "casefile/c.h"\n',      # sideways
        "casefile/c.h": '#include "kernel/missing.h"\n',  # no such header
        "cli/d.cc": '#include "oracle/b.h"\n#include "kernel/a.h"\n#include <vector>\n',  # fine
        "reference/f.h": "#include <cli/d.h>\n",          # up, in angle brackets
        "gadgets/e.cc": "",                               # unknown folder
        "cli/i.h": "",
        "python/g.cc": '#include "cli/i.h"\n',           # sideways: one door into the other
        "validation/h.h": '#include "kernel/a.h"\n',     # up: a rule asking the tiled kernel
        "core/jax_j.h": "",
        "service/k.cc": '#include "core/jax_j.h"\n',     # a generic file naming a dialect
        "service/jax_l.cc": '#include "core/jax_j.h"\n',  # fine: a dialect's own file
        "cli/m.cc": '#include "core/jax_j.h"\n',         # fine: listed
        "service/registry.cc": '#include "core/jax_j.h"\n',  # fine: a registry
        "python/rpa/__init__.py": "from rpa._a import x\n",
        "python/rpa/_a.py": "def f():\n    from rpa import _b\n",  # a cycle, through a function
        "python/rpa/_b.py": "from rpa._a import f\nfrom rpa import _rpa\n",
        "python/rpa/_c.py": "import rpa\nfrom rpa._a import f\n",  # fine: one direction
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        got = violations(root, naming_dialect={"cli/m.cc", "oracle/n.cc"},
                         registries={"service/registry.cc"}) + import_cycles(root)
    want = ["kernel/a.h:1", "oracle/b.h:1", "casefile/c.h:1", "gadgets/e.cc", "reference/f.h:1",
            "python/g.cc:1", "validation/h.h:1", "service/k.cc:1", "oracle/n.cc",
            "python/: an import cycle: rpa._a, rpa._b"]
    missing = [w for w in want if not any(g.startswith(w) for g in got)]
    # The two planted arrows of the house: reported as pointing up or sideways, not as missing.
    missing += [w for w in ("python/g.cc:1", "validation/h.h:1")
                if not any(g.startswith(w) and "is not below" in g for g in got)]
    # The planted dialect names: a new one, and a listed file that names none (stale).
    missing += [w for w, why in (("service/k.cc:1", "generic file"), ("oracle/n.cc", "names no"))
                if not any(g.startswith(w) and why in g for g in got)]
    # More registries than a handful: the interface is being bypassed one registry at a time.
    with tempfile.TemporaryDirectory() as root:
        over = violations(root, naming_dialect=set(),
                          registries={f"service/r{i}.cc" for i in range(MAX_REGISTRIES + 1)})
    if not any(g.startswith(f"{MAX_REGISTRIES + 1} dialect registries") for g in over):
        missing.append("too many registries")
    extra = [g for g in got if not any(g.startswith(w) for w in want)]
    if missing or extra or len(got) != len(want):
        print(f"self-test FAILED: missed {missing}, spurious {extra}")
        return 1
    print(f"self-test: {len(want) + 1} planted violations found, nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print("usage: check_layers.py REPO_ROOT | --self-test", file=sys.stderr)
        return 64
    found = violations(sys.argv[1]) + import_cycles(sys.argv[1])
    for line in found:
        print(line)
    print(f"layers: {len(found)} violations; {len(REGISTRIES) + len(NAMING_DIALECT)} generic "
          f"files name a dialect: {len(REGISTRIES)} registries, {len(NAMING_DIALECT)} that still "
          f"dispatch by name")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
