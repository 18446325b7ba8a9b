#!/usr/bin/env python3
"""Checks every relative link in the repository's Markdown files: the file
(or directory) must exist, and a #fragment must name a heading of the
target, spelled as GitHub makes heading anchors.

    scripts/checklinks.py            # exit 1 and list the broken links
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r'(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|\!\[[^\]]*\]\(([^)\s]+)\)')


def anchors(path):
    out, fence = set(), False
    counts = {}
    with open(path, encoding='utf-8') as f:
        for line in f:
            if line.startswith('```'):
                fence = not fence
            if fence:
                continue
            m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if not m:
                continue
            text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', m.group(1))
            slug = re.sub(r'[^\w\- ]', '', text.lower()).replace(' ', '-')
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            out.add(slug if n == 0 else f'{slug}-{n}')
    return out


def main():
    root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True).stdout.strip() or '.'
    os.chdir(root)
    files = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '*.md'],
                           capture_output=True, text=True).stdout.split()
    bad = 0
    for md in files:
        if 'node_modules' in md:
            continue
        fence = False
        with open(md, encoding='utf-8') as f:
            for no, line in enumerate(f, 1):
                if line.startswith('```'):
                    fence = not fence
                if fence:
                    continue
                for m in LINK.finditer(line):
                    target = m.group(1) or m.group(2)
                    if re.match(r'^[a-z]+:', target):
                        continue
                    path, _, frag = target.partition('#')
                    dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                    if not os.path.exists(dest):
                        print(f'{md}:{no}: {target}: no such file')
                        bad += 1
                        continue
                    if frag and dest.endswith('.md') and frag not in anchors(dest):
                        print(f'{md}:{no}: {target}: no heading #{frag}')
                        bad += 1
    sys.exit(1 if bad else 0)


main()
