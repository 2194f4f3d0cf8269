#!/usr/bin/env python3
"""A generated Obsidian-style vault for import measurements: ROOT NOTES BYTES-PER-NOTE.

Notes spread over 50 folders, each with front matter (one tag), an H1, filler text of about
BYTES-PER-NOTE and one [[wikilink]] to another note. Deterministic (seeded)."""
import os, random, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
words = "heron river lantern orchard granite tidal meadow copper violin harbor quartz ember willow falcon prairie glacier saffron canyon".split()
os.makedirs(root, exist_ok=True)
for i in range(n):
    d = os.path.join(root, f"folder{i % 50}")
    os.makedirs(d, exist_ok=True)
    body = []
    total = 0
    while total < size:
        s = " ".join(random.choice(words) for _ in range(12)) + f" note {i}."
        body.append(s); total += len(s) + 1
    with open(os.path.join(d, f"note-{i}.md"), "w") as f:
        f.write(f"---\ntags: [t{i % 20}]\n---\n# Note {i}\n\n" + "\n".join(body) + f"\n\nSee [[note-{(i*7+1) % n}]].\n")
