#!/usr/bin/env python3
"""Runs the transcripts shown in Markdown files and compares what they print, line for line.

A transcript is one of:
  - a ``` block whose first line starts with "$ ": a shell session; each "$ " line (with its
    "\\" continuations) is a command, the lines up to the next command are what it prints
    (standard output, then standard error). A command with " ... " in it is abbreviated prose:
    the session is checked up to it.
  - a ``` block right after an HTML comment "<!-- transcript: COMMAND -->": what COMMAND prints.
  - a ```python block right after which comes a ``` block: what the Python code prints
    (PYTHONPATH holds the build's Python package).
In the expected lines, a line that is "..." alone stands for any number of printed lines. Exit
codes 0 and 1 (a plan that does not fit is still an answer) are accepted, 2 and above are not.

Usage: readme_transcripts.py [--update] BUILD_DIR PYTHON FILE.md...   (run from the repository
root; PYTHON is the interpreter the build's module is for, "-" to skip the Python transcripts)

--update rewrites the expected lines of the transcripts that differ with what is printed now: each
shown line becomes the printed line with the same label (its text up to the first digit), in order,
the "..." lines kept; a transcript whose lines cannot be paired so is reported and left alone.
Read the diff before committing it: the prose around a transcript may quote its figures.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- transcript: (.*) -->\s*$")


def blocks(lines):
    """Yields (line number, language, content lines, the line before the fence)."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        before = lines[start - 1] if start > 0 else ""
        yield start + 1, m.group(1), lines[start + 1:j], before
        i = j + 1


def matches(expected, actual):
    """Line-for-line equality where an expected "..." line stands for any run of lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def label(line):
    """What a line says before its first figure: the key --update pairs lines by."""
    m = re.match(r"^\D*", line)
    return m.group(0).rstrip()


def updated(expected, actual):
    """The expected lines with each shown line replaced by the printed line of the same label
    (in order, after the previous one); None when a shown line has no such printed line."""
    if not any(e.strip() == "..." for e in expected):
        return list(actual)
    out, at = [], 0
    for e in expected:
        if e.strip() == "...":
            out.append(e)
            continue
        k = next((i for i in range(at, len(actual)) if label(actual[i]) == label(e)), None)
        if k is None:
            return None
        out.append(actual[k])
        at = k + 1
    return out if matches(out, actual) else None


def run(command, cwd, env):
    p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return p.returncode, (p.stdout + p.stderr).splitlines()


def sessions(content):
    """Splits a "$ " block into (command, expected output lines, their first index in content)."""
    out = []
    i = 0
    while i < len(content):
        line = content[i]
        if not line.startswith("$ "):
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(content):
            i += 1
            command = command[:-1] + " " + content[i].strip()
        i += 1
        first = i
        expected = []
        while i < len(content) and not content[i].startswith("$ "):
            expected.append(content[i])
            i += 1
        out.append((command, expected, first))
    return out


def main():
    args = sys.argv[1:]
    update = args[:1] == ["--update"]
    if update:
        args = args[1:]
    build, python, files = args[0], args[1], args[2:]
    root = os.getcwd()
    work = tempfile.mkdtemp(prefix="transcripts-")
    try:
        # the commands' relative paths: the repository's folders, and build/ the build under test
        for name in os.listdir(root):
            if name not in ("build", ".git"):
                os.symlink(os.path.join(root, name), os.path.join(work, name))
        os.symlink(os.path.abspath(build), os.path.join(work, "build"))
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(build), "python"))
        checked = failed = 0
        for path in files:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            all_blocks = list(blocks(lines))
            edits = []  # (first line index in the file, count, new lines)
            for k, (number, language, content, before) in enumerate(all_blocks):
                cases = []  # (command, expected lines, index of the first in the file)
                marker = MARKER.match(before)
                if marker:
                    cases = [(marker.group(1), content, number)]
                elif language == "" and content and content[0].startswith("$ "):
                    for command, expected, first in sessions(content):
                        if " ... " in f" {command} ":
                            break
                        cases.append((command, expected, number + first))
                elif language == "python" and python != "-" and k + 1 < len(all_blocks):
                    nxt = all_blocks[k + 1]
                    if nxt[0] == number + len(content) + 2 and nxt[1] == "":
                        script = os.path.join(work, f"transcript-{number}.py")
                        with open(script, "w", encoding="utf-8") as f:
                            f.write("\n".join(content) + "\n")
                        cases = [(f"{python} {script}", nxt[2], nxt[0])]
                for command, expected, first in cases:
                    checked += 1
                    rc, actual = run(command, work, env)
                    if rc <= 1 and update and not matches(expected, actual):
                        new = updated(expected, actual)
                        if new is not None:
                            edits.append((first, len(expected), new))
                            print(f"updated {path}:{number}: {command}")
                            continue
                    if rc > 1 or not matches(expected, actual):
                        failed += 1
                        print(f"FAIL {path}:{number}: {command}\n  exit {rc}; expected:")
                        print("\n".join("    " + e for e in expected))
                        print("  printed:")
                        print("\n".join("    " + a for a in actual))
            for first, count, new in sorted(edits, reverse=True):
                lines[first:first + count] = new
            if edits:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")
        print(f"{checked} transcripts checked, {failed} differ")
        return 1 if failed or checked == 0 else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
