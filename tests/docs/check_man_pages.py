#!/usr/bin/env python3
"""Checks that the manuals cannot drift from the code (ctest "docs: ...").

Everything is taken from the code, never from a list kept here:
  * config keys: every `constexpr absl::string_view k...Keys[] = {...}` array
    under daemon/ (found by searching the tree, so files may move), each key
    defined in tpud.yaml(5) as a `*key:*` term;
  * tpuctl commands and flags: `tpuctl --help` and `tpuctl COMMAND --help`,
    each command defined in tpuctl(1) as a `*command*` term at a line start,
    each flag named as `*flag*`;
  * tpud flags and commands: `tpud --help`, each in tpud(8);
and the pages built from the scdoc sources must be there, gzipped roff.
Exits 1 listing what is missing.
"""
import argparse
import gzip
import pathlib
import re
import subprocess
import sys

KEY_ARRAY = re.compile(r"constexpr\s+absl::string_view\s+(k\w*Keys)\[\]\s*=\s*\{(.*?)\};", re.S)


def config_keys(source_dir):
    """{key: [array names]} from every k...Keys[] array under daemon/."""
    keys = {}
    for path in sorted((source_dir / "daemon").rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        for name, body in KEY_ARRAY.findall(path.read_text()):
            for key in re.findall(r'"([^"]+)"', body):
                keys.setdefault(key, []).append(f"{path.relative_to(source_dir)}:{name}")
    return keys


def help_section(text, section):
    """First words of the lines of SECTION ("Subcommands:", "Options:") in CLI11 --help output."""
    words, inside = [], False
    for line in text.splitlines():
        if line == section:
            inside = True
        elif inside and not line.strip():
            break
        elif inside and line.startswith("  ") and line[2] != " ":
            words.append(line.split()[0])
    return words


def flags_of(words):
    """"-f,--file" -> ["-f", "--file"]; positionals are left out."""
    return [name for word in words for name in word.split(",") if name.startswith("-")]


def run_help(binary, *args):
    result = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        sys.exit(f"{binary} {' '.join(args)} --help: exit {result.returncode}: {result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", type=pathlib.Path, required=True)
    parser.add_argument("--tpud", required=True)
    parser.add_argument("--tpuctl", required=True)
    parser.add_argument("--man-dir", type=pathlib.Path, required=True)
    args = parser.parse_args()
    man = args.source_dir / "doc" / "man"
    tpud_page = (man / "tpud.8.scd").read_text()
    tpuctl_page = (man / "tpuctl.1.scd").read_text()
    config_page = (man / "tpud.yaml.5.scd").read_text()
    missing = []

    keys = config_keys(args.source_dir)
    if len(keys) < 50:  # The arrays are ~80 keys; fewer means the search no longer finds them.
        missing.append(f"only {len(keys)} config keys found under daemon/: has the Keys[] pattern changed?")
    for key, arrays in sorted(keys.items()):
        if f"*{key}:*" not in config_page:
            missing.append(f"tpud.yaml(5): config key {key} ({', '.join(arrays)}) is not defined as *{key}:*")

    commands = help_section(run_help(args.tpuctl), "Subcommands:")
    flags = set(flags_of(help_section(run_help(args.tpuctl), "Options:")))
    if len(commands) < 12:
        missing.append(f"only {len(commands)} commands in tpuctl --help")
    for command in commands:
        if not re.search(rf"^\*{re.escape(command)}\*", tpuctl_page, re.M):
            missing.append(f"tpuctl(1): command {command} has no *{command}* entry")
        flags.update(flags_of(help_section(run_help(args.tpuctl, command), "Options:")))
    for flag in sorted(flags):
        if f"*{flag}*" not in tpuctl_page:
            missing.append(f"tpuctl(1): flag {flag} is not named as *{flag}*")

    tpud_help = run_help(args.tpud)
    tpud_flags = set(flags_of(help_section(tpud_help, "Options:")))
    for command in help_section(tpud_help, "Subcommands:"):
        if f"*{command}*" not in tpud_page:
            missing.append(f"tpud(8): command {command} is not named as *{command}*")
        tpud_flags.update(flags_of(help_section(run_help(args.tpud, command), "Options:")))
    for flag in sorted(tpud_flags):
        if f"*{flag}*" not in tpud_page:
            missing.append(f"tpud(8): flag {flag} is not named as *{flag}*")

    for page in ("tpud.8", "tpuctl.1", "tpud.yaml.5"):
        built = args.man_dir / f"{page}.gz"
        if not built.is_file() or b".TH " not in gzip.decompress(built.read_bytes()):
            missing.append(f"{built}: not built (scdoc) or not a manual page")

    for line in missing:
        print(f"MISSING {line}")
    print(f"man pages: {len(keys)} config keys, {len(commands)} tpuctl commands, {len(flags)} tpuctl flags, "
          f"{len(tpud_flags)} tpud flags checked; {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
