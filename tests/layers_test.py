#!/usr/bin/env python3
"""The layered build, checked: every #include in daemon/ and client/ points
along an arrow the CMake files allow, and the arrows have no cycle.

Each daemon/<folder>/CMakeLists.txt defines one library (add_library) and the
tpud libraries it may use (target_link_libraries); the allowed includes of a
folder are its own headers and those of every library it reaches. client/ may
include only itself and the generated API (tpud/v1/...). No folder's sources
are globbed. Exit 1 with one line per violation.

Usage: layers_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
ADD = re.compile(r"add_library\((\w+)")
LINK = re.compile(r"target_link_libraries\((\w+)\s+(?:PUBLIC|PRIVATE|INTERFACE)?([^)]*)\)", re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """daemon/shim/wire/x.cc -> "shim/wire"; daemon/core/x.h -> "core"."""
    parts = path.relative_to(ROOT / "daemon").parts
    if parts[:2] == ("shim", "wire"):
        return "shim/wire"
    return parts[0] if len(parts) > 1 else None


def libraries():
    """folder -> (library, [tpud libraries it links])."""
    found = {}
    for cmake in sorted((ROOT / "daemon").rglob("CMakeLists.txt")):
        text = cmake.read_text()
        if re.search(r"GLOB[^)]*\.(cc|h)\b", text):
            yield f"{cmake.relative_to(ROOT)}: globs its sources; list them"
        names = ADD.findall(text)
        if not names:
            continue
        folder = "/".join(cmake.parent.relative_to(ROOT / "daemon").parts)
        links = []
        for target, deps in LINK.findall(text):
            if target == names[0]:
                links += [d for d in deps.split() if d.startswith("tpud_") and d != "tpud_proto"]
        found[folder] = (names[0], links)
    libraries.found = found


def closure(graph, start):
    seen, todo = set(), [start]
    while todo:
        lib = todo.pop()
        for dep in graph.get(lib, []):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def main():
    errors = list(libraries())
    folders = libraries.found
    graph = {lib: deps for lib, deps in folders.values()}
    lib_folder = {lib: folder for folder, (lib, _) in folders.items()}
    for lib in graph:
        if lib in closure(graph, lib):
            errors.append(f"cycle: {lib} reaches itself through target_link_libraries")
    for path in sorted((ROOT / "daemon").rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        folder = folder_of(path)
        if folder is None:
            continue  # daemon/main.cc, daemon/shim_main.cc: executables may use anything.
        if folder not in folders:
            errors.append(f"{path.relative_to(ROOT)}: folder {folder} has no library")
            continue
        lib = folders[folder][0]
        allowed = {lib_folder[d] for d in closure(graph, lib) if d in lib_folder} | {folder}
        for include in INCLUDE.findall(path.read_text()):
            if not include.startswith("daemon/"):
                continue
            target = folder_of(ROOT / include)
            if target not in allowed:
                errors.append(f"{path.relative_to(ROOT)}: includes {include}, but {lib} may not use "
                              f"daemon/{target} (not in its target_link_libraries)")
    for path in sorted((ROOT / "client").rglob("*")):
        if path.suffix in (".cc", ".h"):
            for include in INCLUDE.findall(path.read_text()):
                if not (include.startswith("client/") or include.startswith("tpud/v1/")):
                    errors.append(f"{path.relative_to(ROOT)}: includes {include}; client/ uses only "
                                  "itself and the generated API")
    for error in errors:
        print(error)
    if not errors:
        print(f"layers: {len(folders)} libraries, every include along an allowed arrow, no cycle")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
