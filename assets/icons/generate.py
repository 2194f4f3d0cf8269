#!/usr/bin/env python3
"""Draws Kasten's icon (three linked notes on a rounded card) as RGBA PNGs, no dependencies.

Run from the repository root: python3 assets/icons/generate.py
"""
import math, struct, zlib, os

def png(path, w, h, px):
    raw = b"".join(b"\x00" + bytes(px[y * w * 4:(y + 1) * w * 4]) for y in range(h))
    def chunk(t, d):
        c = struct.pack(">I", len(d)) + t + d
        return c + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
    data += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    open(path, "wb").write(data)

def draw(n):
    ss = 4  # supersampling
    N = n * ss
    bg = (37, 52, 84); edge = (160, 190, 235); node = [(255, 196, 87), (111, 207, 151), (120, 170, 255)]
    nodes = [(0.30, 0.34), (0.70, 0.42), (0.44, 0.72)]
    r_node = 0.11; r_card = 0.2; lw = 0.035
    def seg_dist(px, py, a, b):
        ax, ay = a; bx, by = b
        dx, dy = bx - ax, by - ay
        t = max(0, min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
        return math.hypot(px - (ax + t * dx), py - (ay + t * dy))
    acc = [[0.0] * 4 for _ in range(n * n)]
    for Y in range(N):
        for X in range(N):
            x = (X + 0.5) / N; y = (Y + 0.5) / N
            # rounded card with a margin
            m = 0.06; qx = max(abs(x - 0.5) - (0.5 - m - r_card), 0); qy = max(abs(y - 0.5) - (0.5 - m - r_card), 0)
            if math.hypot(qx, qy) > r_card:
                continue
            col = bg
            for a, b in ((0, 1), (1, 2), (2, 0)):
                if seg_dist(x, y, nodes[a], nodes[b]) < lw:
                    col = edge
            for i, (nx, ny) in enumerate(nodes):
                d = math.hypot(x - nx, y - ny)
                if d < r_node:
                    col = node[i] if d < r_node - 0.02 else (250, 250, 250)
            a = acc[(Y // ss) * n + X // ss]
            a[0] += col[0]; a[1] += col[1]; a[2] += col[2]; a[3] += 1
    px = []
    for a in acc:
        cov = a[3] / (ss * ss)
        if a[3]:
            px += [round(a[0] / a[3]), round(a[1] / a[3]), round(a[2] / a[3]), round(255 * cov)]
        else:
            px += [0, 0, 0, 0]
    return px

here = os.path.dirname(os.path.abspath(__file__))
for name, size in (("32x32.png", 32), ("128x128.png", 128), ("128x128@2x.png", 256), ("icon.png", 512)):
    png(os.path.join(here, name), size, size, draw(size))
    print("wrote", name)
