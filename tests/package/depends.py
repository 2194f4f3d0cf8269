#!/usr/bin/env python3
"""Checks that a .deb's Depends: cover every shared library its programs load.

usage: depends.py DEB PACKAGE

For every ELF file PACKAGE installed (dpkg -L), `ldd` names the libraries it loads; each is
mapped to the Debian package that owns it (dpkg -S). Each such package must be reachable from
the .deb's Depends: through the Depends/Pre-Depends of installed packages, or be Essential.
Exits 1, naming what is missing, when one is not; libraries the package ships itself
(/usr/lib/kasten) are skipped. Run it with the package installed.
"""
import os
import re
import subprocess
import sys


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout


def names(field):
    """Package names in a Depends-style field (every alternative, versions dropped)."""
    out = set()
    for part in field.split(","):
        for alt in part.split("|"):
            n = re.sub(r"\(.*?\)|\[.*?\]", "", alt).strip().split(":")[0]
            if n:
                out.add(n)
    return out


def owner(path):
    for p in {path, os.path.realpath(path), re.sub(r"^/usr/lib/", "/lib/", path), re.sub(r"^/lib/", "/usr/lib/", path)}:
        line = run("dpkg", "-S", p).splitlines()
        if line and ":" in line[0] and "diversion" not in line[0]:
            return line[0].split(":")[0].split(",")[0].strip()
    return None


def main():
    deb, package = sys.argv[1], sys.argv[2]
    depends = names(run("dpkg-deb", "-f", deb, "Depends"))
    closure, todo = set(), list(depends)
    while todo:
        n = todo.pop()
        if n in closure:
            continue
        closure.add(n)
        f = run("dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", n)
        todo.extend(names(f) - closure)
    essential = set()
    for line in run("dpkg-query", "-W", "-f=${Package} ${Essential} ${Priority}\n").splitlines():
        p = line.split()
        if len(p) >= 2 and (p[1] == "yes" or "required" in p[1:]):
            essential.add(p[0])
    files = [f for f in run("dpkg", "-L", package).splitlines() if os.path.isfile(f)]
    elves = [f for f in files if open(f, "rb").read(4) == b"\x7fELF"]
    if not elves:
        print(f"depends: {package} installed no programs", file=sys.stderr)
        return 1
    missing = {}
    for elf in elves:
        for line in run("ldd", elf).splitlines():
            if "not found" in line:
                missing.setdefault(line.split()[0], set()).add(elf)
                continue
            m = re.search(r"=> (/\S+)", line)
            # found through the rpath $ORIGIN/../lib/kasten/lib: /usr/bin/../lib/kasten/…
            lib = os.path.normpath(m.group(1)) if m else ""
            if not m or lib.startswith("/usr/lib/kasten/"):
                continue
            pkg = owner(m.group(1))
            if pkg is None:
                missing.setdefault(m.group(1) + " (no package owns it)", set()).add(elf)
            elif pkg not in closure and pkg not in essential:
                missing.setdefault(f"{pkg} (for {m.group(1)})", set()).add(elf)
    if missing:
        for what, by in sorted(missing.items()):
            print(f"depends: not covered by Depends: {what}, loaded by {', '.join(sorted(by))}", file=sys.stderr)
        return 1
    print(f"depends: the libraries of {len(elves)} programs are covered by Depends: {', '.join(sorted(depends))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
