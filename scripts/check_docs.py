#!/usr/bin/env python3
"""Checks the documentation against the repository (run by scripts/test.sh).

1. Links: every relative link or image in README.md and docs/**/*.md points
   to a file the repository holds (tracked by git when this is a git work
   tree), and every `#anchor` to a heading of the target page. No http(s)
   URL may point outside this machine: only loopback addresses (127.x,
   localhost, [::1]) appear, as examples of local servers.
2. Settings: a table preceded by a marker

       <!-- settings: clap STRUCT DIR -->           flags of a clap struct
       <!-- settings: clap ENUM::VARIANT DIR -->    flags of a subcommand variant
       <!-- settings: fields STRUCT DIR -->         fields of a serde struct

   lists, in the first cell of each row, exactly the flags (`--name`) or the
   fields (`name`) that the Rust type declares (found by name in any .rs file
   under DIR), and for a clap flag with a literal default
   (`default_value_t = X` / `default_value = "X"`), the row holds that value.
   So a setting added, removed or renamed in the code fails this check until
   the page says so.

Exit status 0 when everything holds, 1 with one line per problem otherwise.
"""

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = re.compile(r"^https?://(127\.[0-9.]+|localhost|\[::1\])([:/]|$)")
URL = re.compile(r"https?://[^\s)>\]`'\"]+")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MARKER = re.compile(r"<!--\s*settings:\s*(clap|fields)\s+(\S+)\s+(\S+)\s*-->")


def tracked_files():
    """Repository files: git's index when available, else the file system."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        files = {f for f in out.decode().split("\0") if f}
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    return {str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts}


def doc_pages():
    pages = [ROOT / "README.md"]
    pages += sorted((ROOT / "docs").rglob("*.md"))
    return [p for p in pages if p.is_file()]


def slug(heading):
    """The anchor a Markdown renderer gives a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
        elif unicodedata.category(ch).startswith(("L", "N")):
            out.append(ch)
    return "".join(out)


def anchors(path):
    seen = {}
    result = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m and not in_code:
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            result.add(s if n == 0 else f"{s}-{n}")
    return result


def check_links(files):
    problems = []
    for page in doc_pages():
        rel_page = page.relative_to(ROOT)
        text = page.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            for url in URL.findall(line):
                if not LOOPBACK.match(url):
                    problems.append(f"{rel_page}:{n}: a URL that leaves the machine: {url}")
        # Links outside code blocks and inline code.
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        prose = re.sub(r"`[^`\n]*`", "", prose)
        for target in LINK.findall(prose):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                if not LOOPBACK.match(target):
                    problems.append(f"{rel_page}: a link that leaves the repository: {target}")
                continue
            path_part, _, frag = target.partition("#")
            dest = page if not path_part else (page.parent / path_part).resolve()
            try:
                rel = str(dest.relative_to(ROOT))
            except ValueError:
                problems.append(f"{rel_page}: a link that leaves the repository: {target}")
                continue
            if path_part and rel not in files and not any(f.startswith(rel + "/") for f in files):
                problems.append(f"{rel_page}: a link to a file the repository does not hold: {target}")
                continue
            if frag and dest.suffix == ".md" and dest.is_file() and frag not in anchors(dest):
                problems.append(f"{rel_page}: no heading for the anchor #{frag} in {rel}")
    return problems


def strip_comments(src):
    return "\n".join(re.sub(r"^\s*//.*$", "", line) for line in src.splitlines())


def body_after(src, start):
    """The text between the brace at or after `start` and its match."""
    i = src.index("{", start)
    depth = 0
    for j in range(i, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return src[i + 1 : j]
    raise ValueError("unbalanced braces")


def find_type(name, directory):
    """The body of `struct NAME` or of `ENUM::VARIANT { … }` under directory."""
    enum, _, variant = name.partition("::")
    for path in sorted((ROOT / directory).rglob("*.rs")):
        src = strip_comments(path.read_text(encoding="utf-8"))
        if variant:
            m = re.search(r"\benum\s+" + re.escape(enum) + r"\b", src)
            if not m:
                continue
            body = body_after(src, m.end())
            v = re.search(r"\b" + re.escape(variant) + r"\s*\{", body)
            if v:
                return body_after(body, v.start())
        else:
            m = re.search(r"\bstruct\s+" + re.escape(name) + r"\b[^;{]*\{", src)
            if m:
                return body_after(src, m.start())
    return None


def fields(body):
    """(name, attributes) for every field of a struct body."""
    result = []
    attrs = []
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("#["):
            attrs.append(s)
            continue
        m = re.match(r"^(?:pub(?:\([^)]*\))?\s+)?([a-z_][a-z0-9_]*)\s*:", s)
        if m:
            result.append((m.group(1), " ".join(attrs)))
            attrs = []
    return result


def declared(kind, name, directory):
    body = find_type(name, directory)
    if body is None:
        return None
    out = {}
    for field, attrs in fields(body):
        if kind == "fields":
            out[field] = None
            continue
        if "flatten" in attrs or "subcommand" in attrs:
            continue
        if not re.search(r"#\[arg\([^\]]*\blong\b", attrs):
            continue  # positional
        m = re.search(r'\blong\s*=\s*"([^"]+)"', attrs)
        flag = "--" + (m.group(1) if m else field.replace("_", "-"))
        d = re.search(r'default_value_t\s*=\s*([^,\)\]]+)', attrs) or re.search(r'default_value\s*=\s*"([^"]*)"', attrs)
        default = d.group(1).strip() if d else None
        # Only a literal can be compared; a named constant is the code's business.
        if default is not None and not re.fullmatch(r"-?[0-9][0-9._]*|true|false", default) and "default_value_t" in (d.group(0) if d else ""):
            default = None
        out[flag] = default
    return out


def check_settings():
    problems = []
    for page in doc_pages():
        rel_page = page.relative_to(ROOT)
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = MARKER.search(line)
            if not m:
                continue
            kind, name, directory = m.groups()
            want = declared(kind, name, directory)
            if want is None:
                problems.append(f"{rel_page}:{i + 1}: no type {name} under {directory} (moved? update the marker)")
                continue
            rows = {}
            j = i + 1
            while j < len(lines) and not lines[j].startswith("|"):
                j += 1
            for row in lines[j:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")]
                names = re.findall(r"`([^`]+)`", cells[0])
                for nm in names:
                    nm = nm.split("=")[0].split(" ")[0]
                    rows[nm] = row
            documented = {k for k in rows if (k.startswith("--") if kind == "clap" else True)}
            for missing in sorted(set(want) - documented):
                problems.append(f"{rel_page}:{i + 1}: {name} has {missing}, which the table does not list")
            for extra in sorted(documented - set(want)):
                problems.append(f"{rel_page}:{i + 1}: the table lists {extra}, which {name} does not have")
            for flag, default in want.items():
                if default is None or flag not in rows:
                    continue
                shown = default.replace('"', "")
                if shown not in rows[flag]:
                    problems.append(f"{rel_page}:{i + 1}: {flag} defaults to {shown} in the code; the table does not say so")
    return problems


def main():
    files = tracked_files()
    problems = check_links(files) + check_settings()
    for p in problems:
        print(f"docs: {p}", file=sys.stderr)
    pages = len(doc_pages())
    if problems:
        print(f"docs: {len(problems)} problem(s) in {pages} page(s)", file=sys.stderr)
        return 1
    print(f"docs: {pages} page(s): every link resolves inside the repository; every settings table matches its type")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
